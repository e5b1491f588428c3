"""GET /api/health: {"status", "arch", "engine", "model"}; with worker processes (aiayn serve --workers N)
also {"workers": {"alive", "of"}}, "degraded" while one is down and a 503 "down" when they died too often."""

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from aiayn.web.served import Served
from aiayn.web.shapes import HealthAnswer, responses


def router(served: Served) -> APIRouter:
    routes = APIRouter()
    translator = served.translator
    health_info = {"status": "ok", "arch": translator.arch, "engine": served.engine,
                   "model": Path(translator.model_dir or "").name}
    worker_pool = getattr(translator, "pool", None)  # worker processes (aiayn serve --workers N), or None

    @routes.get("/api/health", responses=responses(HealthAnswer, 503))
    async def health():  # async, and never waits for the model or its thread
        if worker_pool is None:
            return health_info
        # a worker that died is replaced by the next plain request (WorkerPool.search); until then, or for
        # good when they died too often (then plain requests get 503), fewer than all are alive
        alive, of = worker_pool.alive(), worker_pool.workers
        state = {**health_info, "status": "down" if worker_pool.down else "ok" if alive == of else "degraded",
                 "workers": {"alive": alive, "of": of}}
        return JSONResponse(state, status_code=503 if worker_pool.down else 200)

    return routes
