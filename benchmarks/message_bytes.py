"""Uplink bytes per client per round: raw, packed, delta-coded and quantised label messages.

Runs federated co-training round by round with :class:`cotrain.federation.client.Client` objects
and a
majority-vote consensus (exactly what ``FederatedCoTrainer`` does each round, written out so
that every round's per-client hard labels on U are at hand), on digits and breast cancer,
5 clients (3 random forests, 2 decision trees), 20 rounds. Each client's labels are encoded as:

* raw: ``int64`` codes, ``8 * |U|`` bytes;
* packed: :class:`cotrain.wire.messages.HardLabels` (what the trainer sends today);
* delta+zlib: what a client of a federation with ``encoding="delta"`` sends, through the
  :class:`cotrain.wire.endpoints.UploadSender` of its :class:`cotrain.wire.format.WireFormat`
  (round 1 is a full message; every upload arrives, so each is coded against the last);
* delta+lzma: the same :class:`cotrain.wire.delta.DeltaHardLabels` with the lzma compressor.

Soft labels (each client's ``predict_proba`` on U, last round): float32 ``SoftLabels`` vs
``QuantizedSoftLabels`` at 8, 4 and 2 bits (sizes depend only on the shape).

Each dataset runs twice. (1) Majority consensus, fixed learner seeds, as the trainer runs by
default: the consensus labels all of U, every client trains on it and, since U is then in its
training set, reproduces it, so labels stop changing after round 2. (2) The harder case for
delta coding: qualified-majority consensus (quorum 0.9, abstains elsewhere, so the broadcast
exercises the abstain path) with the learners re-seeded every round, so labels on the
abstained part of U keep churning.

Run: ``python benchmarks/message_bytes.py`` (about 30 s).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import record
from consensus import get_consensus
from cotrain.datasets.loaders import load_breast_cancer_split, load_digits_split
from cotrain.federation.client import Client, decode_labels
from cotrain.wire.compact import QuantizedSoftLabels
from cotrain.wire.delta import DeltaHardLabels
from cotrain.wire.format import WireFormat
from cotrain.wire.messages import HardLabels, SoftLabels

N_CLIENTS = 5
ROUNDS = 20
SETTLED_FROM = 6  # rounds >= this count as "after the consensus has settled"


def run(name: str, split, vote: str = "majority") -> tuple[str, dict[str, float]]:
    reseed = vote != "majority"
    rule = get_consensus(vote)
    X, y = split.X_labeled, split.y_labeled
    X_public = split.X_public
    classes = np.unique(y)
    C = len(classes)
    parts = np.array_split(np.random.default_rng(0).permutation(len(y)), N_CLIENTS)
    estimators = [
        RandomForestClassifier(n_estimators=50, random_state=0),
        RandomForestClassifier(n_estimators=50, random_state=1),
        RandomForestClassifier(n_estimators=50, random_state=2),
        DecisionTreeClassifier(random_state=3),
        DecisionTreeClassifier(random_state=4),
    ]
    clients = [
        Client(i, est, X[p], y[p], classes, X_public=X_public)
        for i, (est, p) in enumerate(zip(estimators, parts, strict=True))
    ]
    wire = WireFormat(n_classes=C, n_public=X_public.shape[0], encoding="delta")
    senders = [wire.sender() for _ in clients]  # the zlib uplink, as a federation sends it

    broadcast = None
    prev_consensus = None
    prev_codes = None
    rows = []
    totals = dict.fromkeys(("raw", "packed", "zlib", "lzma", "down_packed", "down_delta"), 0)
    settled = {"packed": 0, "zlib": 0, "lzma": 0}
    max_settled_ratio = 0.0
    for t in range(1, ROUNDS + 1):
        if reseed:  # a stochastic learner: a fresh seed every fit, so labels keep churning
            for i, c in enumerate(clients):
                c.model.estimator.set_params(random_state=1000 * t + i)
        results = [c.run_round(t, broadcast) for c in clients]
        for r in results:
            if r.error is not None:
                raise r.error
        codes = [decode_labels(r.message) for r in results]
        raw = sum(c.astype(np.int64).nbytes for c in codes)
        packed = sum(len(r.message) for r in results)
        z = sum(
            len(s.encode(c, round=t, ref_round=t - 1)) for s, c in zip(senders, codes, strict=True)
        )
        last = [None] * len(codes) if prev_codes is None else prev_codes
        lz = sum(
            len(DeltaHardLabels.encode(c, p, C, compress="lzma"))
            for c, p in zip(codes, last, strict=True)
        )
        previous = codes if prev_codes is None else prev_codes
        churn = np.mean([np.mean(c != p) for c, p in zip(codes, previous, strict=True)])
        prev_codes = codes
        consensus = np.asarray(rule(np.stack(codes), n_classes=C, weights=None))
        message = HardLabels(consensus, C, allow_abstain=True)
        broadcast = message.to_bytes()
        d_down = len(DeltaHardLabels.encode(consensus, prev_consensus, C, allow_abstain=True))
        changed = "-" if prev_consensus is None else int(np.sum(consensus != prev_consensus))
        prev_consensus = consensus
        for key, value in zip(totals, (raw, packed, z, lz, len(broadcast), d_down), strict=True):
            totals[key] += value
        if t >= SETTLED_FROM:
            settled["packed"] += packed
            settled["zlib"] += z
            settled["lzma"] += lz
            max_settled_ratio = max(max_settled_ratio, z / packed)
        n = len(clients)
        rows.append(
            f"{t:>5} {churn:>7.3%} {changed!s:>7} {raw / n:>8.0f} {packed / n:>8.0f} "
            f"{z / n:>8.1f} {lz / n:>8.1f} {z / packed:>7.1%} {len(broadcast):>7} {d_down:>7}"
        )

    probas = [c.model.predict_proba(X_public) for c in clients]
    soft_lines = []
    f32 = SoftLabels(probas[0]).nbytes
    for label, size, err in [("float32 SoftLabels", f32, 0.0)] + [
        (
            f"QuantizedSoftLabels {bits}-bit",
            QuantizedSoftLabels(probas[0], bits).nbytes,
            max(float(np.abs(QuantizedSoftLabels(p, bits).probs - p).max()) for p in probas),
        )
        for bits in (8, 4, 2, 1)
    ]:
        soft_lines.append(f"  {label:<26} {size:>8} bytes  {size / f32:>6.1%}  max|err| {err:.4f}")

    n = N_CLIENTS
    head = (
        f"== {name}: |U| = {X_public.shape[0]}, C = {C}, {N_CLIENTS} clients "
        f"(3 RF + 2 DT{', re-seeded every round' if reseed else ''}), {ROUNDS} rounds, "
        f"{vote} consensus ==\n"
        "bytes per client uplink per round (mean over clients); churn = fraction of a client's "
        "labels changed since its last round;\nchanged = consensus labels changed; "
        "down = server broadcast (packed HardLabels vs delta+zlib with abstain)\n"
        f"{'round':>5} {'churn':>7} {'changed':>7} {'raw':>8} {'packed':>8} {'d+zlib':>8} "
        f"{'d+lzma':>8} {'zlib/pk':>7} {'down_pk':>7} {'down_d':>7}"
    )
    s_ratio = settled["zlib"] / settled["packed"]
    tot = (
        f"\ntotal uplink over {ROUNDS} rounds, all {n} clients: raw {totals['raw']}, "
        f"packed {totals['packed']}, delta+zlib {totals['zlib']} "
        f"({totals['zlib'] / totals['packed']:.1%} of packed), delta+lzma {totals['lzma']} "
        f"({totals['lzma'] / totals['packed']:.1%})\n"
        f"total downlink per receiver: packed {totals['down_packed']}, delta+zlib "
        f"{totals['down_delta']} ({totals['down_delta'] / totals['down_packed']:.1%})\n"
        f"settled (rounds {SETTLED_FROM}..{ROUNDS}): delta+zlib = {s_ratio:.1%} of packed "
        f"(worst single round {max_settled_ratio:.1%}); target <= 10 %: "
        f"{'MET' if max_settled_ratio <= 0.10 else 'NOT MET'}\n"
        f"whole run: delta+zlib = {totals['zlib'] / totals['packed']:.1%} of packed; "
        f"target <= 25 %: {'MET' if totals['zlib'] <= 0.25 * totals['packed'] else 'NOT MET'}\n"
        "soft labels per client per round (last round's predict_proba on U; max|err| over "
        "clients):\n" + "\n".join(soft_lines)
    )
    return head + "\n" + "\n".join(rows) + tot, totals


def main() -> None:
    texts = []
    digits = load_digits_split(random_state=0)
    cancer = load_breast_cancer_split(random_state=0)
    for name, split, vote in (
        ("digits", digits, "majority"),
        ("digits", digits, "qualified"),
        ("breast cancer", cancer, "majority"),
        ("breast cancer", cancer, "qualified"),
    ):
        text, _ = run(name, split, vote)
        texts.append(text)
    note = (
        "notes: a delta message is a 14-byte header (10-byte header + CRC-32) + the compressed\n"
        "changes, so 'nothing changed' costs 14 bytes. Breast cancer's packed upload is only\n"
        "57 bytes (10-byte header + 47 bytes for 370 one-bit labels): the 10 % target (5.7\n"
        "bytes) is below the bare 10-byte header of the existing message format, so it cannot\n"
        "be met by any message of this header style. On digits (360 bytes) it is met with the\n"
        "majority consensus (labels settle after round 2) but not with the qualified consensus\n"
        "and re-seeded learners, where ~4 % of each client's labels keep changing every round."
    )
    record("message_bytes", "\n\n".join([*texts, note]))


if __name__ == "__main__":
    main()
