"""The JSON API's routers, one module per area."""
