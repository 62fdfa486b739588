"""A loopback stand-in for ``vllm serve`` (dev mode, NCCL weight transfer) on a CPU, for tests.

It serves a real transformers model over real HTTP on 127.0.0.1 with the routes TRL's
``VLLMClient`` and diagevo's endpoint engine use: ``/health``, ``/v1/models``, ``/server_info``,
``/get_world_size``, ``/v1/completions`` (token-id prompts, token ids and log-probabilities back),
``/v1/chat/completions``, ``/reset_prefix_cache`` and the weight-update routes. Weights arrive
through :meth:`receive`, which the stand-in ``packed_nccl_broadcast_producer`` calls in place of an
NCCL broadcast (the server runs in the trainer's process). Every request served is recorded with
a fingerprint of the weights it was served from.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import torch
import vllm
from vllm.sampling_params import SamplingParams


class StandinServer:
    def __init__(self, model: str) -> None:
        import os

        log = os.environ.pop("VLLM_STANDIN_LOG", None)  # the server's engine is not the trainer's: unrecorded
        try:
            self.engine = vllm.LLM(model)
        finally:
            if log is not None:
                os.environ["VLLM_STANDIN_LOG"] = log
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, data: Any, status: int = 200) -> None:
                body = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802
                path = self.path.split("?")[0]
                if path == "/health":
                    self._send({})
                elif path == "/v1/models":
                    self._send({"data": [{"id": "standin"}]})
                elif path == "/server_info":
                    self._send(
                        {
                            "vllm_config": {
                                "weight_transfer_config": {"backend": "nccl"},
                                "model_config": {"logprobs_mode": "processed_logprobs"},
                            }
                        }
                    )
                elif path == "/get_world_size":
                    self._send({"world_size": 1})
                else:
                    self._send({"error": path}, 404)

            def do_POST(self) -> None:  # noqa: N802
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                path = self.path.split("?")[0]
                if path in ("/v1/completions", "/v1/chat/completions"):
                    self._send(server.complete(path, body))
                elif path == "/reset_prefix_cache":
                    self._send({"success": True})
                elif path in (
                    "/init_weight_transfer_engine",
                    "/start_weight_update",
                    "/finish_weight_update",
                    "/update_weights",
                ):
                    self._send({})
                else:
                    self._send({"error": path}, 404)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    def receive(self, items: list[tuple[str, torch.Tensor]]) -> None:
        """The weights of one update (in place of the NCCL broadcast)."""
        with self.lock:
            params = dict(self.engine.hf.named_parameters())
            with torch.no_grad():
                for name, tensor in items:
                    params[name].copy_(tensor.detach().to(params[name].dtype))
        vllm.record("weights_received", n=len(items))

    def complete(self, route: str, body: dict[str, Any]) -> dict[str, Any]:
        params = SamplingParams(
            n=int(body.get("n", 1)),
            temperature=float(body.get("temperature", 1.0)),
            top_p=float(body.get("top_p", 1.0)),
            max_tokens=int(body.get("max_tokens", 16)),
            seed=body.get("seed"),
            logprobs=body.get("logprobs"),
        )
        tok = self.engine.tokenizer
        with self.lock:
            vllm.record("served", route=route, weights=vllm.fingerprint(self.engine.hf))
            if route == "/v1/chat/completions":
                ids = tok.apply_chat_template(
                    body["messages"], tokenize=True, add_generation_prompt=True, return_dict=True
                )["input_ids"]
                out = self.engine._one(list(ids), params)
                return {
                    "choices": [
                        {"index": c.index, "message": {"role": "assistant", "content": c.text}} for c in out.outputs
                    ]
                }
            prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
            choices = []
            for p in prompts:
                ids = p if isinstance(p, list) else tok(p, add_special_tokens=False)["input_ids"]
                for c in self.engine._one(list(ids), params).outputs:
                    lps = [next(iter(d.values())).logprob for d in c.logprobs or []]
                    tokens = [f"token_id:{t}" for t in c.token_ids]
                    choices.append(
                        {
                            "index": len(choices),
                            "text": c.text,
                            "prompt_token_ids": list(ids),
                            "token_ids": c.token_ids,
                            "logprobs": {"tokens": tokens, "token_logprobs": lps, "top_logprobs": [None] * len(tokens)},
                        }
                    )
            return {"choices": choices}

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()
