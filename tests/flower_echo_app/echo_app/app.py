"""Echo app: every ClientApp replies with its node id, node config and process id.

The ServerApp waits for ``min-nodes`` connected nodes, sends one message to each and
writes a JSON summary to the path in the run config key ``out``::

    {"node_ids": [...], "replies": [{"node_id": ..., "node_config": {...}, "pid": ...}],
     "errors": [...], "run_config": {...}}
"""

from __future__ import annotations

import json
import os
import time

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

client_app = ClientApp()
server_app = ServerApp()


@client_app.query()
def query(msg: Message, context: Context) -> Message:
    """Reply with this node's config and process id, after an optional sleep."""
    time.sleep(float(context.run_config.get("client-sleep", 0.0)))
    reply = ConfigRecord(
        {
            "node_config": json.dumps(dict(context.node_config)),
            "pid": os.getpid(),
        }
    )
    return Message(content=RecordDict({"echo": reply}), reply_to=msg)


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    """Query every connected node once and write what came back."""
    cfg = context.run_config
    timeout = float(cfg.get("wait-timeout", 30.0))
    min_nodes = int(cfg.get("min-nodes", 1))
    deadline = time.monotonic() + timeout
    node_ids = sorted(grid.get_node_ids())
    while len(node_ids) < min_nodes and time.monotonic() < deadline:
        time.sleep(0.2)
        node_ids = sorted(grid.get_node_ids())
    messages = [
        Message(content=RecordDict(), dst_node_id=node_id, message_type="query")
        for node_id in node_ids
    ]
    replies, errors = [], []
    for rep in grid.send_and_receive(messages, timeout=timeout):
        if rep.has_error():
            errors.append({"node_id": rep.metadata.src_node_id, "error": str(rep.error)})
            continue
        echo = rep.content["echo"]
        replies.append(
            {
                "node_id": rep.metadata.src_node_id,
                "node_config": json.loads(str(echo["node_config"])),
                "pid": int(echo["pid"]),
            }
        )
    summary = {
        "node_ids": node_ids,
        "replies": replies,
        "errors": errors,
        "run_config": {k: v for k, v in cfg.items()},
    }
    print("ECHO", json.dumps(summary))
    if cfg.get("out"):
        with open(str(cfg["out"]), "w", encoding="utf-8") as fh:
            json.dump(summary, fh)
