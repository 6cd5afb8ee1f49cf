"""Runs an `rlx export` model in onnxruntime on recorded observations and
compares it with rlx's outputs (written by tests/export.rs).

Usage: onnx_parity.py MODEL.onnx REFERENCE.json. Exits 1 naming what
disagrees; prints a line with "agree" when all does.
"""

import json
import sys

import numpy as np
import onnxruntime as ort

TIE = 1e-4


def main(model_path, reference_path):
    ref = json.load(open(reference_path))
    session = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    meta = session.get_modelmeta().custom_metadata_map
    problems = []
    if meta.get("rlx.algorithm") != ref["algorithm"] or meta.get("rlx.env") != ref["env"]:
        problems.append(f"metadata names {meta.get('rlx.algorithm')} on {meta.get('rlx.env')}")
    obs_input = session.get_inputs()[0]
    obs = np.asarray(ref["obs"], dtype=np.float32)
    shape = list(obs_input.shape[1:])
    rows = obs.size // int(np.prod(shape))
    if obs_input.type == "tensor(uint8)":
        # rlx holds a byte image as b / 255; the model takes the bytes.
        obs = np.rint(obs * 255.0).astype(np.uint8)
    feeds = {"obs": obs.reshape([rows] + shape)}
    if ref["state_size"]:
        feeds["state_in"] = np.zeros((rows, ref["state_size"]), dtype=np.float32)
    names = [o.name for o in session.get_outputs()]
    out = dict(zip(names, session.run(names, feeds)))
    # A recurrent model's second step, from rlx's own state out.
    second = None
    if ref.get("next") is not None:
        feeds["state_in"] = np.asarray(ref["state_out"], dtype=np.float32).reshape(rows, ref["state_size"])
        second = dict(zip(names, session.run(names, feeds)))

    def error(ours, theirs):
        ours, theirs = np.asarray(ours, dtype=np.float64).ravel(), np.asarray(theirs, dtype=np.float64).ravel()
        if ours.shape != theirs.shape:
            return float("inf")
        return float(np.max(np.abs(ours - theirs) / np.maximum(1.0, np.abs(ours))))

    def compare_actions(ours, out, step):
        """Problems with the greedy actions of `out` against rlx's; the near-ties."""
        if out["actions"].dtype == np.int64:
            scores = out.get("logits", out.get("q_values"))
            top2 = np.sort(scores, axis=1)[:, -2:]
            tied = (top2[:, 1] - top2[:, 0]) <= TIE * np.maximum(1.0, np.abs(top2[:, 1]))
            wrong = int(((np.asarray(ours).reshape(rows) != out["actions"]) & ~tied).sum())
            if wrong:
                problems.append(f"{wrong} greedy actions differ ({step})")
            return int(tied.sum())
        e = error(ours, out["actions"])
        if e > 1e-4:
            problems.append(f"actions differ by {e:.2e} ({step})")
        return 0

    ties = compare_actions(ref["actions"], out, "first step")
    if second is not None:
        ties += compare_actions(ref["next"]["actions"], second, "second step")
        for step, ours, theirs in (("first", ref["state_out"], out), ("second", ref["next"]["state_out"], second)):
            e = error(ours, theirs["state_out"])
            if e > 1e-4:
                problems.append(f"states out differ by {e:.2e} ({step} step)")
    if ties > 50:
        problems.append(f"{ties} near-ties")
    if ref["values"] is not None:
        e = error(ref["values"], out["value"])
        if e > 1e-4:
            problems.append(f"values differ by {e:.2e}")
    if ref["probs"] is not None:
        logits = out["logits"] - out["logits"].max(axis=1, keepdims=True)
        probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        e = error(ref["probs"], probs)
        if e > 1e-4:
            problems.append(f"probabilities differ by {e:.2e}")
    if problems:
        print("onnxruntime disagrees: " + "; ".join(problems))
        sys.exit(1)
    print(f"onnxruntime {ort.__version__} and rlx agree on {rows} observations ({ties} near-ties left out)")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
