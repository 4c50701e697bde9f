"""An MLServer runtime that serves a chunkrt policy over the Open Inference Protocol v2,
for `policy.kind = "remote"` with `protocol = "oip"` (scripts/oip_server.py starts it).

The whole sampler runs here, one `ModelInfer` per chunk: the inputs are the raw
observation vector (FP32 [d_obs]) and the host's initial noise (FP32 [horizon, d_a]),
named as in the model settings; the request parameters `sampler_method` and
`sampler_steps` choose the sampler; the output (FP64 [horizon, d_a]) holds absolute joint
positions; the reply parameter `server_ns` is this runtime's time for the chunk. The
sampler is the reference one of scripts/policy_reference.py (onnxruntime + NumPy, the
Rust sampler's algorithm). With a token in the settings, a request without
`authorization: Bearer <token>` is refused.
"""

import os
import sys
import time

import numpy as np
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.errors import MLServerError
from mlserver.types import InferenceRequest, InferenceResponse, Parameters

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from policy_reference import Reference  # noqa: E402


class ChunkModel(MLModel):
    async def load(self) -> bool:
        extra = self.settings.parameters.extra or {}
        self.ref = Reference(extra["manifest"])
        self.token = extra.get("token")
        self.keys = extra.get("keys", {})
        self.state_key = self.keys.get("state", "observation/state")
        self.noise_key = self.keys.get("noise", "noise")
        self.actions_key = self.keys.get("actions", "actions")
        self.method = self.ref.m["sampler"]["method"]
        self.steps = self.ref.m["sampler"]["steps"]
        self.stall_after = int(extra.get("stall_after", 0))
        self.stall_s = float(extra.get("stall_s", 0.3))
        self.exit_after = int(extra.get("exit_after", 0))
        self.served = 0
        return True

    def _check_token(self, payload):
        if not self.token:
            return
        headers = {}
        if payload.parameters is not None and payload.parameters.headers:
            headers = {k.lower(): v for k, v in payload.parameters.headers.items()}
        if headers.get("authorization") != f"Bearer {self.token}":
            raise MLServerError("bad token: authorization Bearer expected", status_code=400)

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        t0 = time.monotonic_ns()
        self._check_token(payload)
        inputs = {i.name: i for i in payload.inputs}
        for key in (self.state_key, self.noise_key):
            if key not in inputs:
                raise MLServerError(f"no input {key!r} (inputs: {sorted(inputs)})", status_code=400)
        state = NumpyCodec.decode_input(inputs[self.state_key]).astype(np.float64).reshape(-1)
        if state.size != self.ref.d_obs:
            raise MLServerError(
                f"{self.state_key} has {state.size} values, the model takes {self.ref.d_obs}",
                status_code=400,
            )
        noise = NumpyCodec.decode_input(inputs[self.noise_key]).astype(np.float32).reshape(-1)
        if noise.size != self.ref.h * self.ref.d_a:
            raise MLServerError(
                f"{self.noise_key} has {noise.size} values, the chunk {self.ref.h} x {self.ref.d_a}",
                status_code=400,
            )
        params = payload.parameters.model_dump() if payload.parameters is not None else {}
        method = params.get("sampler_method") or self.method
        steps = int(params.get("sampler_steps") or self.steps)
        _, chunk = self.ref.sample(state, noise, steps, method)
        self.served += 1
        if self.stall_after and self.served % self.stall_after == 0:
            time.sleep(self.stall_s)
        if self.exit_after and self.served >= self.exit_after:
            os._exit(3)
        out = NumpyCodec.encode_output(self.actions_key, np.ascontiguousarray(chunk, dtype=np.float64))
        return InferenceResponse(
            model_name=self.name,
            model_version=self.version,
            id=payload.id,
            outputs=[out],
            parameters=Parameters(server_ns=time.monotonic_ns() - t0),
        )
