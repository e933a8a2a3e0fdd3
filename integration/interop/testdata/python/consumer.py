"""A consumer on Debian's python3-pika, driven by dlqbot's interop tests.

It takes one JSON argument: {"url": ..., "queue": ..., "fail": true|false}.
Every delivery its handler sees is written to stdout as one JSON line
({"event": "handled", ...}); "ready" is written once it consumes. When fail
is set the handler rejects every message without requeue, so the broker
dead-letters it; otherwise it acks. SIGTERM stops it.
"""

import hashlib
import json
import signal
import sys

import pika

cfg = json.loads(sys.argv[1])


def log(o):
    sys.stdout.write(json.dumps(o) + "\n")
    sys.stdout.flush()


def on_message(ch, method, props, body):
    h = props.headers or {}

    def text(v):
        return v.decode() if isinstance(v, bytes) else (v or "")

    log({
        "event": "handled",
        "lib": "pika",
        "queue": cfg["queue"],
        "messageId": props.message_id,
        "bodySha256": hashlib.sha256(body).hexdigest(),
        "replayId": text(h.get("x-replay-id")),
        "replayCount": h.get("x-replay-count") or 0,
        "replayedFrom": text(h.get("stroma.dlq.replayed_from")),
        "hasXDeath": bool(h.get("x-death")),
        "failed": bool(cfg["fail"]),
    })
    if cfg["fail"]:
        ch.basic_reject(method.delivery_tag, requeue=False)
    else:
        ch.basic_ack(method.delivery_tag)


def main():
    conn = pika.BlockingConnection(pika.URLParameters(cfg["url"]))
    ch = conn.channel()
    ch.basic_qos(prefetch_count=5)
    ch.queue_declare(cfg["queue"], passive=True)
    ch.basic_consume(cfg["queue"], on_message)

    def stop(*_):
        ch.stop_consuming()

    signal.signal(signal.SIGTERM, stop)
    log({"event": "ready"})
    ch.start_consuming()
    conn.close()


if __name__ == "__main__":
    main()
