"""GET /api/timeline and GET /api/timeline/STEP?sentence=I: the maps the model's run kept at its validations
(aiayn.web.timeline); 404 for a step or sentence it did not keep."""

from fastapi import APIRouter

from aiayn.errors import AiaynError
from aiayn.web.respond import error
from aiayn.web.served import Served
from aiayn.web.shapes import TimelineAnswer, TimelineMaps, responses
from aiayn.web.timeline import find_timeline, timeline_index, timeline_snapshot


def router(served: Served) -> APIRouter:
    routes = APIRouter()
    tokenizer = served.translator.tokenizer
    timeline_dir = find_timeline(served.translator.model_dir)  # the run's stored maps, if any

    @routes.get("/api/timeline", responses=responses(TimelineAnswer))
    def timeline_steps():
        return timeline_index(timeline_dir, tokenizer)

    @routes.get("/api/timeline/{step}", responses=responses(TimelineMaps, 404, 422))
    def timeline_maps(step: int, sentence: int = 0):
        try:
            return timeline_snapshot(timeline_dir, step, sentence)
        except AiaynError as err:
            return error(404, str(err))

    return routes
