"""datatrove compatibility: the files datatrove's own DocumentTokenizer writes are the files
tools/tokenize writes (byte for byte), and triax reads from them exactly the samples datatrove's
DatatroveFolderDataset (what nanotron trains on) gives, and the same document positions as it
returns for nanotron's document masking (return_positions, from the index).

  datatrove_compat.py <data_dump executable> <source dir>
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from datatrove.data import Document
from datatrove.pipeline.tokens.tokenizer import DocumentTokenizer
from datatrove.utils.dataset import DatatroveFolderDataset

DUMP, SOURCE = sys.argv[1], Path(sys.argv[2])
LICENSES = Path("/usr/share/common-licenses")
SEQUENCE_LENGTH = 31
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)


with tempfile.TemporaryDirectory() as work:
    work = Path(work)
    # Documents: the paragraphs of a few licence texts, as JSONL.
    paragraphs = []
    for name in ("Apache-2.0", "GPL-3", "MPL-2.0", "Artistic"):
        text = (LICENSES / name).read_text(encoding="utf-8", errors="replace")
        paragraphs += [p.strip() for p in text.split("\n\n") if p.strip()]
    jsonl = work / "docs.jsonl"

    jsonl.write_text("".join(json.dumps({"text": p}) + "\n" for p in paragraphs))

    # triax's tool, training a small BPE tokenizer on the way.
    ours = work / "ours"
    subprocess.run([sys.executable, SOURCE / "tools" / "tokenize", "--tokenizer", "bpe:300", "--output", ours, jsonl],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tokenizer_json = ours / "tokenizer.json"

    # datatrove's DocumentTokenizer, same tokenizer and end-of-document token, documents in order.
    theirs = work / "theirs"
    DocumentTokenizer(
        output_folder=str(theirs),
        tokenizer_name_or_path=str(tokenizer_json),
        eos_token="<|endoftext|>",
        save_filename="tokens",
        shuffle_documents=False,
    ).run(iter(Document(text=p, id=str(i)) for i, p in enumerate(paragraphs)), rank=0, world_size=1)
    their_files = sorted(theirs.glob("*.ds"))
    check(len(their_files) == 1, f"datatrove wrote {their_files}")
    ds = their_files[0]
    check(ds.read_bytes() == (ours / "tokens.ds").read_bytes(), "the .ds files differ")
    check(Path(f"{ds}.index").read_bytes() == (ours / "tokens.ds.index").read_bytes(), "the .ds.index files differ")
    their_head = Path(f"{ds}.metadata").read_text().splitlines()[:2]
    our_head = (ours / "tokens.ds.metadata").read_text().splitlines()[:2]
    check(their_head == our_head, f"metadata differs: {their_head} vs {our_head}")

    # triax reads datatrove's folder: the same samples as datatrove's reader.
    dumped = subprocess.run([DUMP, theirs, str(SEQUENCE_LENGTH), "300"], check=True, capture_output=True, text=True)
    triax_samples = [list(map(int, line.split())) for line in dumped.stdout.splitlines()]
    dataset = DatatroveFolderDataset(str(theirs), seq_len=SEQUENCE_LENGTH, token_size=2, recursive=False)
    reference = [dataset[i]["input_ids"].tolist() for i in range(len(dataset))]
    check(len(reference) > 100, f"only {len(reference)} samples")
    check(triax_samples == reference, f"samples differ ({len(triax_samples)} from triax, {len(reference)} from datatrove)")

    # Document masking: the positions inside each document, from the index, as datatrove gives them.
    dumped = subprocess.run([DUMP, theirs, str(SEQUENCE_LENGTH), "300", "positions"], check=True,
                            capture_output=True, text=True)
    triax_positions = [list(map(int, line.split())) for line in dumped.stdout.splitlines()]
    dataset = DatatroveFolderDataset(str(theirs), seq_len=SEQUENCE_LENGTH, token_size=2, recursive=False,
                                     return_positions=True)
    reference_positions = [dataset[i]["positions"].tolist() for i in range(len(dataset))]
    restarts = sum(row[1:].count(0) for row in reference_positions)
    check(restarts > 50, f"only {restarts} documents start inside a sample")
    check(triax_positions == reference_positions,
          f"positions differ ({len(triax_positions)} from triax, {len(reference_positions)} from datatrove)")

    # And the vocabulary check refuses ids outside a smaller vocabulary, naming the file.
    refused = subprocess.run([DUMP, theirs, str(SEQUENCE_LENGTH), "100"], capture_output=True, text=True)
    check(refused.returncode != 0 and ds.name in refused.stderr and "vocabulary size 100" in refused.stderr,
          f"a vocabulary of 100 was not refused: {refused.stderr}")

print("datatrove compatibility:", "FAILED" if failures else f"ok ({len(reference)} samples compared)")
sys.exit(1 if failures else 0)
