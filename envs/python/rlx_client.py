"""rlx's Python client for external applications: an app that owns its
simulator loop asks a running `rlx train --env external:<address>` for
actions (see cluster/src/external.rs for the protocol). Pure Python, the
standard library only.

    from rlx_client import PolicyClient

    client = PolicyClient("127.0.0.1:9900", cookie=open("cookie").read().rstrip("\r\n"))
    obs = sim.reset()
    action = client.start_episode(obs)
    while True:
        obs, reward, terminated, truncated = sim.step(action)
        action = client.step(obs, reward, terminated, truncated)
        if action is None:  # the episode ended
            obs = sim.reset()
            action = client.start_episode(obs)

Observations are sequences of floats of the server's width; actions come
back as an int (Discrete), a list of ints (MultiDiscrete) or a list of
floats (Box).
"""

import hashlib
import hmac
import json
import os
import socket
import struct

MAGIC = b"RLXA"
VERSION = 1


class Dropped(Exception):
    """The server dropped this client; the message says why."""


def _read_exact(sock, n):
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the server closed the connection")
        data += chunk
    return bytes(data)


class PolicyClient:
    def __init__(self, address, cookie):
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._join(cookie.encode())
        self.sock.settimeout(None)  # the server answers at the pace of training
        hello = json.loads(self._receive(b"H"))
        self.obs_dim = hello["obs_dim"]
        self.action_kind = hello["action"]
        self.action_width = hello["action_width"]

    def _join(self, key):
        challenge = _read_exact(self.sock, 4 + 1 + 32)
        if challenge[:4] != MAGIC or challenge[4] != VERSION:
            raise ConnectionError("not an rlx server")
        theirs = challenge[5:]
        mine = os.urandom(32)
        proof = hmac.new(key, b"peer" + theirs + mine, hashlib.sha256).digest()
        self.sock.sendall(MAGIC + bytes([VERSION]) + mine + proof)
        verdict = self.sock.recv(1)
        if verdict != b"\x01":
            raise PermissionError("the server refused the cookie")
        reply = _read_exact(self.sock, 32)
        expected = hmac.new(key, b"node" + mine + theirs, hashlib.sha256).digest()
        if not hmac.compare_digest(reply, expected):
            raise PermissionError("the server does not know the cookie")

    def _send(self, tag, body):
        self.sock.sendall(struct.pack("<I", len(body) + 1) + tag + body)

    def _receive(self, tag):
        (length,) = struct.unpack("<I", _read_exact(self.sock, 4))
        if length == 0 or length > 1 << 20:
            raise ConnectionError(f"a frame of {length} bytes")
        frame = _read_exact(self.sock, length)
        if frame[:1] == b"E":
            raise Dropped(frame[1:].decode(errors="replace"))
        if frame[:1] != tag:
            raise ConnectionError(f"a frame of kind {frame[:1]!r} where {tag!r} was due")
        return frame[1:]

    def _obs(self, obs):
        values = [float(x) for x in obs]
        if len(values) != self.obs_dim:
            raise ValueError(f"an observation of {len(values)} values; the server takes {self.obs_dim}")
        return struct.pack(f"<{self.obs_dim}f", *values)

    def _action(self):
        body = self._receive(b"A")
        w = self.action_width
        if self.action_kind == "box":
            return list(struct.unpack(f"<{w}f", body))
        values = list(struct.unpack(f"<{w}q", body))
        return values[0] if w == 1 else values

    def start_episode(self, obs):
        """Starts an episode at `obs`; returns the first action."""
        self._send(b"S", self._obs(obs))
        return self._action()

    def step(self, obs, reward, terminated=False, truncated=False):
        """Reports what the last action led to; returns the next action,
        or None when the episode ended (call start_episode next)."""
        self._send(b"T", struct.pack("<dBB", float(reward), bool(terminated), bool(truncated)) + self._obs(obs))
        if terminated or truncated:
            return None
        return self._action()

    def close(self):
        self.sock.close()
