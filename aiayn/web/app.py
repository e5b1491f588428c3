"""FastAPI app: POST /api/translate, POST /api/step, GET /api/health, GET / (one static page).

Inputs are bounded (text length, beam size, request body size); malformed requests get a 4xx JSON
error; no file path ever comes from a request: the model is fixed when the app is created."""

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from aiayn.inspect.capture import capture
from aiayn.inspect.qkv import attention_step

STATIC = Path(__file__).parent / "static"
MAX_TEXT, MAX_BEAM, MAX_BODY, MAX_TOKENS = 500, 8, 16_384, 256


class TranslateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    beam: int = Field(4, ge=1, le=MAX_BEAM)


class StepRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source_ids: list[int] = Field(min_length=1, max_length=MAX_TOKENS)
    target_input_ids: list[int] = Field(min_length=1, max_length=MAX_TOKENS)
    kind: str = Field(pattern="^(encoder_self|decoder_self|cross)$")
    layer: int = Field(ge=0)
    head: int = Field(ge=0)
    query: int = Field(ge=0)


def _translate(translator, req: TranslateRequest) -> dict:
    maps = capture(translator, req.text, beam=req.beam)
    tok = translator.tokenizer
    return {"translation": maps.translation, "arch": maps.arch,
            "source_tokens": maps.source_tokens, "target_tokens": maps.target_tokens,
            "target_input_tokens": maps.target_input_tokens,
            "source_ids": [tok.sp.piece_to_id(p) for p in maps.source_tokens],
            "target_input_ids": [tok.bos_id] + [tok.sp.piece_to_id(p) for p in maps.target_input_tokens[1:]],
            "score": maps.score,
            "maps": {k: v.round(4).tolist() for k, v in maps.maps.items()}}


def create_app(translator) -> FastAPI:
    app = FastAPI(title="aiayn", docs_url=None, redoc_url=None)
    vocab = translator.tokenizer.vocab_size

    @app.middleware("http")
    async def limit_body(request: Request, call_next):
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY):
            return JSONResponse({"error": f"request body over {MAX_BODY} bytes"}, status_code=413)
        return await call_next(request)

    @app.exception_handler(ValueError)
    async def bad_value(request: Request, err: ValueError):
        return JSONResponse({"error": str(err)}, status_code=400)

    @app.get("/api/health")
    def health():
        return {"status": "ok", "arch": translator.arch, "model": Path(translator.model_dir or "").name}

    @app.post("/api/translate")
    def translate(req: TranslateRequest):
        return _translate(translator, req)

    @app.post("/api/step")
    def step(req: StepRequest):
        if any(not 0 <= i < vocab for i in req.source_ids + req.target_input_ids):
            raise ValueError(f"token ids must be in [0, {vocab})")
        return attention_step(translator.model, req.source_ids, req.target_input_ids, req.kind, req.layer,
                              req.head, req.query)

    @app.get("/")
    def index():
        return FileResponse(STATIC / "index.html", media_type="text/html")

    return app
