"""The web dashboard: queues, jobs, dead letters, live workers and ``/metrics``.

>>> app = create_app("sqlite:///jobs.db", token="s3cret-token")   # an ASGI app
>>> uvicorn.run(app, host="127.0.0.1", port=8765)
"""

from alkstore.dashboard.app import AuthHook, create_app
from alkstore.dashboard.site import bind_plan, is_loopback

__all__ = ["AuthHook", "bind_plan", "create_app", "is_loopback"]
