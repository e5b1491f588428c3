"""The app's routes, one module per group of endpoints; each module's `router(served)` gives its routes,
bound to the served model (aiayn.web.served), and aiayn.web.app.create_app lists them."""
