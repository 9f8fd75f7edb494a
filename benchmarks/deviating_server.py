"""A deviating server against private sites, by direct calls of the site's handlers.

Each attack asks a site what an honest server never would and prints, from what the server
actually received: the distinct releases it got, the ε those releases cost one private
record of the site (the transcript ε: the mechanism's own composition of exactly those
releases), the site's own ledger ε, and how many requests the site refused. The site is the
real code a Flower ClientApp runs (``site_train``, ``secagg_share_reply``), its ledger on
its own disk; no network. Attacks:

- ``new tokens``: 31 runs under new run tokens at a site whose ``[privacy]`` states no
  ``budget`` (the production example's mechanism);
- ``repeat``: round 1 asked 30 times under one token;
- ``label spaces``: seven label spaces other than the declared one, at two sites that differ
  by one record of class 2 (identical replies, or not);
- ``secure, new tokens``: 10 secure-sum runs at one site (``SecureTeacherVotes``, ε = 4 per
  run, no budget);
- ``secure, second sum``: the first share of a round asked for a second sum (what a subset
  sum under another name needs); transcript ε if the share came back alone;
- ``secure, twin sites``: round 0, a round past the plan, another pool, 400 sites claimed,
  queries outside U, at two secure sites that differ by one record (identical replies, or
  not; anything recorded);
- ``secure, plan claims``: ``secure-n-sites`` 400 and ``secure-rounds`` 101.

Run::

    python benchmarks/deviating_server.py
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
from sklearn.tree import DecisionTreeClassifier

from cotrain.flower import protocol
from cotrain.flower.client_app import site_reply, site_train
from cotrain.flower.secure_site import N_SITES, QUERIES, ROUNDS, secagg_share_reply
from cotrain.flower.site import load_site, pool_fingerprint, write_site
from cotrain.flower.site_state import open_site_ledger
from cotrain.privacy import SecureTeacherVotes, SubsampleAndAggregate
from cotrain.privacy.ledgers.site_ledger import SiteLedger
from cotrain.privacy.mechanisms.skellam import skellam_epsilon
from cotrain.wire import envelope
from cotrain.wire.format import WireFormat

CLASSES = [0, 1, 2]
OTHER_SPACES = ([0, 1, 7], [0, 1, 2.5], [-1, 0, 1], [0, 1], [0, 1, 2, 2], ["0", "1", "2"],
                [2, 0, 1])  # fmt: skip


def _site(root: Path, name: str, privacy: Any, extra: int = 0) -> Path:
    rng = np.random.default_rng(0)
    y = np.arange(60) % 2
    X = rng.normal(size=(60, 2)) + y[:, None]
    U = np.random.default_rng(1).normal(size=(100, 2))  # the production example's |U|
    X, y = np.vstack([X, np.full((extra, 2), 3.0)]), np.concatenate([y, np.full(extra, 2)])
    return write_site(root / name, X, y, U, DecisionTreeClassifier(max_depth=3), client_id=0,
                      privacy=privacy, classes=CLASSES)  # fmt: skip


def _train(path: Path, classes: Any, token: str, t: int = 1, **extra: Any) -> dict:
    U = load_site(path).X_public
    config = {"round": t, "client-index": 0, "seed": 0, "ref-round": 0, "broadcast-ref": 0,
              "pool-hash": pool_fingerprint(U), "classes": classes, "run-token": token,
              **WireFormat(3, len(U)).to_config()}  # fmt: skip
    arrays = {}
    if extra:
        arrays[QUERIES] = extra.pop(QUERIES, np.arange(len(U), dtype="<i4").tobytes())
        config.update(extra)
    content = {"config": {protocol.ROUND: config}, "arrays": arrays}
    context = SimpleNamespace(node_config={"site": str(path)}, run_config={})
    return site_reply(context, "train", lambda site: site_train(site, content))


def _labels_row(name: str, path: Path, replies: list[dict]) -> str:
    got = [r["arrays"][envelope.LABELS] for r in replies if envelope.LABELS in r["arrays"]]
    distinct = len(set(got))
    site = load_site(path)
    transcript = SiteLedger(site.privacy, len(CLASSES), len(site.X_public))
    for k in range(distinct):
        transcript.record(k, b"")
    ledger = open_site_ledger(site, len(CLASSES))
    refused = len(replies) - len(got)
    return (f"| {name} | {len(replies)} | {distinct} | {transcript.epsilon():.4f} | "
            f"{ledger.epsilon():.4f} | {refused} |")  # fmt: skip


def main() -> None:
    logging.getLogger("cotrain").setLevel(logging.ERROR)  # each refusal is logged at the site
    rows = []
    mech = SubsampleAndAggregate(n_teachers=30, sigma=30.0)  # the production example's
    votes = SecureTeacherVotes(n_teachers=2, epsilon=4.0, n_sites=3, rounds=1)
    sizes = {N_SITES: 3, ROUNDS: 2}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = _site(root, "tokens", mech)
        replies = [_train(path, CLASSES, f"run{k}") for k in range(31)]
        rows.append(_labels_row("new tokens (no budget: default ε = 10)", path, replies))
        path = _site(root, "repeat", mech)
        replies = [_train(path, CLASSES, "same") for _ in range(30)]
        rows.append(_labels_row("round 1 asked 30 times", path, replies))
        twins = [_site(root, "without", mech), _site(root, "with", mech, extra=1)]
        same = all(_train(twins[0], c, "x") == _train(twins[1], c, "x") for c in OTHER_SPACES)
        recorded = sum(len(open_site_ledger(load_site(p), 3).sent()) for p in twins)
        rows.append(f"| 7 other label spaces, twin sites | 14 | 0 | 0 | 0 | 14 "
                    f"(identical replies: {same}; recorded: {recorded}) |")  # fmt: skip

        twins = [_site(root, "s-without", votes), _site(root, "s-with", votes, extra=1)]
        asked = [{"round": 0}, {"round": 2}, {"pool-hash": "0" * 64}, {N_SITES: 400},
                 {QUERIES: np.array([0, 999], dtype="<i4").tobytes()}]  # fmt: skip
        same = all(_train(twins[0], CLASSES, "x", **{**sizes, **a})
                   == _train(twins[1], CLASSES, "x", **{**sizes, **a}) for a in asked)  # fmt: skip
        recorded = sum(len(open_site_ledger(load_site(p), 3).sent()) for p in twins)
        rows.append(f"| secure, round 0 / past the plan / other pool / 400 sites / queries "
                    f"outside U, twin sites | 10 | 0 | 0 | 0 | 10 (identical replies: {same}; "
                    f"recorded: {recorded}) |")  # fmt: skip

        path = _site(root, "secure", votes)
        replies = [_train(path, CLASSES, f"s{k}", **sizes) for k in range(10)]
        plan = votes.plan(3, 100, 3, 2)
        ledger = open_site_ledger(load_site(path), 3)
        answered = sum(envelope.ERROR not in r["config"] for r in replies)
        rows.append(f"| secure, 10 new tokens | 10 | {answered} | "
                    f"{_composed(plan, answered):.4f} | "
                    f"{ledger.epsilon():.4f} | {10 - answered} |")  # fmt: skip

        path = _site(root, "subset", votes)
        _train(path, CLASSES, "sub", **sizes)
        ask = {"run-token": "sub", "round": 1, "secure-step": "first", "threshold": 3,
               "n-classes": 3, **sizes}  # fmt: skip
        secagg_share_reply(load_site(path), ask)
        try:
            secagg_share_reply(load_site(path), ask)
            second, eps = "given", skellam_epsilon(plan.share_answer, 100, plan.delta)
        except Exception:
            second, eps = "refused", plan.epsilon()
        ledger = open_site_ledger(load_site(path), 3)
        rows.append(f"| secure, the first share asked for a second sum | 2 | 1 | {eps:.4f} | "
                    f"{ledger.epsilon():.4f} | {int(second == 'refused')} |")  # fmt: skip
        for claim in ({N_SITES: 400}, {ROUNDS: 101}):
            path = _site(root, f"claim{len(claim)}{next(iter(claim))}", votes)
            replies = [_train(path, CLASSES, "c", t, **{**sizes, **claim}) for t in (1, 2, 3)]
            answered = sum(envelope.ERROR not in r["config"] for r in replies)
            ledger = open_site_ledger(load_site(path), 3)
            rows.append(f"| secure, claim {claim} | 3 | {answered} | "
                        f"{_composed(plan, answered):.4f} | {ledger.epsilon():.4f} | "
                        f"{3 - answered} |")  # fmt: skip
    print("| attack | requests | distinct releases | transcript ε | site ledger ε | refused |")
    print("| --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))


def _composed(plan: Any, releases: int) -> float:
    """ε of ``releases`` first shares under ``plan`` (no threshold: each is an answer)."""
    from cotrain.privacy.mechanisms.secure_votes import shifts_epsilon

    return shifts_epsilon([plan.step_event("first")] * releases, plan.delta)


if __name__ == "__main__":
    main()
