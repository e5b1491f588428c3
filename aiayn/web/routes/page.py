"""The page: GET / (static/index.html) and GET /static/NAME (its scripts and style: only the files of static/
with a type below, fixed when the app is created). An engine without attention maps (ct2) has no page (it
shows attention maps): GET / is a 404 that says so."""

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse
from starlette.datastructures import Headers
from starlette.staticfiles import NotModifiedResponse, StaticFiles

from aiayn.web.respond import NO_PAGE, error
from aiayn.web.served import Served

STATIC = Path(__file__).parent.parent / "static"
STATIC_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html"}


class PageFiles(StaticFiles):
    """static/'s files of the types in STATIC_TYPES, by name only (no folders, no other files), each with
    Cache-Control: no-cache: a browser asks again on every load (a 304 when unchanged), so after an upgrade
    the page never mixes old and new modules."""

    def __init__(self, *, directory: Path):
        super().__init__(directory=directory)
        self.names = {p.name for p in directory.iterdir() if p.suffix in STATIC_TYPES}

    async def get_response(self, path: str, scope):
        if path not in self.names:
            return error(404, "no such file")
        return await super().get_response(path, scope)

    def file_response(self, full_path, stat_result, scope, status_code: int = 200):
        response = FileResponse(full_path, status_code=status_code, stat_result=stat_result,
                                media_type=STATIC_TYPES[Path(full_path).suffix], headers={"Cache-Control": "no-cache"})
        if self.is_not_modified(response.headers, Headers(scope=scope)):
            return NotModifiedResponse(response.headers)
        return response


def router(served: Served) -> APIRouter:
    routes = APIRouter()
    if not served.capabilities.attention_maps:
        @routes.get("/")
        def no_page():
            return error(404, NO_PAGE)

        return routes

    @routes.get("/")
    def index():
        return FileResponse(STATIC / "index.html", media_type="text/html")

    routes.mount("/static", PageFiles(directory=STATIC))
    return routes
