"""A minimal policy server for comparison with `rlx serve`: the exported
ONNX model in onnxruntime behind Python's threading HTTP server, speaking
the same `POST /v1/actions` JSON (no batching across requests).

Usage: ort_server.py MODEL.onnx PORT
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import onnxruntime as ort

# Its best configuration for a small model under concurrent requests: one
# thread per run (the default spreads each tiny run over every core, and the
# request threads then fight over them: 355 requests/s in a trial run).
options = ort.SessionOptions()
options.intra_op_num_threads = 1
options.inter_op_num_threads = 1
session = ort.InferenceSession(sys.argv[1], options, providers=["CPUExecutionProvider"])


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle's algorithm on, the
    # body waits for the client's delayed ACK (40 ms a request).
    disable_nagle_algorithm = True

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        obs = np.asarray(json.loads(body)["observations"], dtype=np.float32)
        (actions,) = session.run(["actions"], {"obs": obs})
        answer = json.dumps({"actions": actions.tolist()}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


ThreadingHTTPServer.daemon_threads = True
# Every load client connects at once: a listen backlog of 5 would reset some.
ThreadingHTTPServer.request_queue_size = 1024
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), Handler).serve_forever()
