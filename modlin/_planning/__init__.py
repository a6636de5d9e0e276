"""Planning: the exactness contract, :class:`~modlin.Plan` and :class:`~modlin.RNSPlan`, the
choice between them, and tilings. Imports arithmetic, engines, runtime."""
