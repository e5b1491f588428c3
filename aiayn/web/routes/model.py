"""The model panel: GET /api/info (its size, languages, training facts and examples: aiayn.web.info) and
GET /api/positions (the positional-encoding panel: aiayn.web.positions), both computed once."""

from fastapi import APIRouter

from aiayn.web.positions import positions_panel
from aiayn.web.served import Served
from aiayn.web.shapes import InfoAnswer, PositionsAnswer, responses


def router(served: Served) -> APIRouter:
    routes = APIRouter()
    info, positions = served.info, positions_panel(served.translator.model)

    @routes.get("/api/info", responses=responses(InfoAnswer))
    async def model_panel():
        return info  # computed once, like health_info

    @routes.get("/api/positions", responses=responses(PositionsAnswer))
    async def positions_table():  # the positional-encoding panel; computed once
        return positions

    return routes
