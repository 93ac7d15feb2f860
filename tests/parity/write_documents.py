"""Writes a token folder of short documents for the document-masking parity runs: NAME.ds
(uint16 ids below 128), NAME.ds.index (the document ends) and NAME.ds.metadata, as datatrove's
DocumentTokenizer lays them out. Document lengths 1..29 vary so that most 17-token samples hold
several documents and cut one at each edge.

  write_documents.py OUT_DIR
"""
import random
import struct
import sys
from pathlib import Path

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
rng = random.Random(11)
tokens, ends = [], []
while len(tokens) < 4000:
    tokens += [rng.randrange(1, 128) for _ in range(rng.randrange(1, 30))]
    tokens[-1] = 0  # each document ends with its end-of-document token, as datatrove appends one
    ends.append(len(tokens))
(out / "documents.ds").write_bytes(struct.pack(f"<{len(tokens)}H", *tokens))
(out / "documents.ds.index").write_bytes(struct.pack(f"<{len(ends)}Q", *ends))
(out / "documents.ds.metadata").write_text(f"parity-documents|2\n{len(tokens)}\n{len(tokens)} T")
