"""Measure the 8-bit face network's activation ranges and time it against the float network (prints figures).

    .venv/bin/python bench/faces_quantize.py [--write] [--frames 8] [--widths 640 1280]

With ``--write`` the ranges are measured again (MinMax calibration on calibration_inputs below: generated frames
at 640 and 1280 px and the verification's crops) and written to exporter/faces/centerface-int8.json;
the 8-bit model's SHA-256 is printed, to be recorded as quantized.QUANTIZED_SHA256 after recall and false boxes
have been measured with it (bench/faces.py, bench/faces_candidates.py). Without it the model is built from the
ranges in the repository and checked.

Then, for each width, the CPU time of one network run (one intra-op thread, as detect_video runs it) of the float
and the 8-bit network on --frames generated 720p frames, alternated, and how far their heatmaps differ.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import av
import numpy as np

from exporter.faces import detector, quantized
from exporter.faces import testset as ts

# Calibration frames: testset clips of these seeds (no benchmark uses them), CALIBRATION_FRAMES frames each, each
# frame at the network sizes of CALIBRATION_WIDTHS (the detector's and the one the benchmarks compare with).
CALIBRATION_SEEDS = range(91_000, 91_030)
CALIBRATION_FRAMES = 4
CALIBRATION_WIDTHS = (640, 1280)


def calibration_inputs() -> Iterator[np.ndarray]:
    """The calibration's network inputs (float32, NCHW): each frame of the calibration clips scaled to the
    network's size for each of CALIBRATION_WIDTHS, and for frames with a face the verification's crop around it."""
    bands = [*ts.SIZE_BANDS, None]
    for k, seed in enumerate(CALIBRATION_SEEDS):
        clip = ts.make_clip(seed, length=CALIBRATION_FRAMES, band=bands[k % len(bands)])
        for rgb, truth in zip(clip.frames(), clip.truth, strict=True):
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            for width in CALIBRATION_WIDTHS:
                net_w, net_h = detector.network_size(clip.width, clip.height, width)
                scaled = frame.to_ndarray(width=net_w, height=net_h, format="rgb24")
                yield np.ascontiguousarray(scaled.transpose(2, 0, 1)[None], dtype=np.float32)
            if truth is not None:
                box = np.array([truth], np.float32)
                # the first verification scale only: the shipped ranges were measured so, before the second
                # scale existed; the second scale's crops run with them, and recall was measured that way
                box_px, side = detector.VERIFY_SCALES[0]
                crops, _inside = detector.verify_crops(rgb, box, side, box_px)
                yield np.ascontiguousarray(crops.transpose(0, 3, 1, 2), dtype=np.float32)


def session(model: bytes):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = detector.VIDEO_INTRA_OP_THREADS
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="measure the ranges again and write them")
    parser.add_argument("--frames", type=int, default=8, help="frames timed at each width")
    parser.add_argument("--widths", type=int, nargs="+", default=[640, 1280])
    args = parser.parse_args()

    data = detector.weights_path().read_bytes()
    detector.check_weights(data)
    started = time.process_time()
    if args.write:
        model = quantized.calibrate(data, quantized.RANGES_FILE, calibration_inputs())
        print(f"ranges written to {quantized.RANGES_FILE.name} in {time.process_time() - started:.1f} CPU s")
    else:
        model = quantized.quantized_model(data)
        print(f"8-bit model built and checked in {time.process_time() - started:.1f} CPU s")
    print(f"8-bit model SHA-256 {hashlib.sha256(model).hexdigest()} ({len(model) / 1e6:.2f} MB)")
    print(f"load {os.getloadavg()}")

    float_session = session(quantized.float_model(data).SerializeToString())
    int8_session = session(model)
    clip = ts.make_clip(4242, length=args.frames, band=(80, 160))
    frames = list(clip.frames())
    for width in args.widths:
        net_w, net_h = detector.network_size(clip.width, clip.height, width)
        blobs = [
            np.ascontiguousarray(
                av.VideoFrame.from_ndarray(rgb, format="rgb24")
                .to_ndarray(width=net_w, height=net_h, format="rgb24")
                .transpose(2, 0, 1)[None],
                dtype=np.float32,
            )
            for rgb in frames
        ]
        for sess in (float_session, int8_session):  # the first run at a size plans its memory: not timed
            sess.run(["537"], {"input.1": blobs[0]})
        cpu = {"float": 0.0, "int8": 0.0}
        worst = 0.0
        for blob in blobs:
            outputs = {}
            for name, sess in (("float", float_session), ("int8", int8_session)):
                t = time.process_time()
                outputs[name] = sess.run(["537"], {"input.1": blob})[0]
                cpu[name] += time.process_time() - t
            worst = max(worst, float(np.abs(outputs["float"] - outputs["int8"]).max()))
        per = {name: value / len(blobs) * 1000 for name, value in cpu.items()}
        print(
            f"{net_w}x{net_h}: float {per['float']:.1f} ms, 8-bit {per['int8']:.1f} ms of CPU a run "
            f"({per['float'] / per['int8']:.2f}x); largest heatmap difference {worst:.3f}; load {os.getloadavg()}"
        )


if __name__ == "__main__":
    main()
