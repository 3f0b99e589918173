"""An onnxruntime session standing in for a run's model: ``model(**net_input)`` -> logits tensor.

Shared by x-serve (an ONNX export, xdpx/serve/onnx_backend.py) and x-eval / x-pred / x-serve on the onnx
backend of an int8 model (xdpx/inference/backends.py).
"""

from __future__ import annotations

from typing import Any

from xdpx.errors import UserError
from xdpx.utils.optional import require


class OnnxModel:
    """An onnxruntime session (CPU) called like the run's model on the processor's ``net_input``."""

    def __init__(self, path: str, input_names: list[str], threads: int | None = None) -> None:
        onnxruntime = require("onnxruntime", "serving an ONNX model")

        options = onnxruntime.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        try:
            self.session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime's own classes (InvalidProtobuf, Fail...): the file does not load
            reason = str(e).splitlines()[0] if str(e) else ""
            raise UserError(f"{path} is not a loadable ONNX model: it is truncated, corrupt or not an ONNX file "
                            f"({type(e).__name__}: {reason}); export it again") from None
        self.input_names = input_names

    def eval(self) -> OnnxModel:  # predict_logits puts its model in eval mode
        return self

    def __call__(self, **net_input: Any) -> Any:
        import torch  # lazy: x-serve imports this module before it knows whether torch runs the model

        outputs = self.session.run(None, {n: net_input[n].cpu().numpy() for n in self.input_names})
        return torch.from_numpy(outputs[0])
