"""Parquet input of tools/tokenize against datatrove: a folder of Parquet files (part-1.parquet
beside a subfolder part-1/, which datatrove reads after it; several row groups each; a null and an empty text among the rows, the text in a column
that is not called "text") tokenized by tools/tokenize and by datatrove's ParquetReader and
DocumentTokenizer gives the same .ds, .ds.index and .ds.metadata bytes. A Parquet file without the
text column is refused, naming the file, the column and the columns it has; so is a file that is
no Parquet. The metadata's token count is written as datatrove writes it, for any count.

  datatrove_parquet_compat.py <source dir>
"""
import importlib.machinery
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

import humanize
import pyarrow as pa
import pyarrow.parquet as pq
from datatrove.pipeline.readers import ParquetReader
from datatrove.pipeline.tokens.tokenizer import DocumentTokenizer

SOURCE = Path(sys.argv[1])
TOKENIZE = SOURCE / "tools" / "tokenize"
LICENSES = Path("/usr/share/common-licenses")
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)


def tokenize(*args):
    return subprocess.run([sys.executable, TOKENIZE, *map(str, args)], capture_output=True, text=True)


def write_parquet(path, texts):
    """Rows of (id, content, url), seven rows to a row group."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table({"id": [f"{path.stem}-{i}" for i in range(len(texts))], "content": texts,
                      "url": [f"https://example.com/{i}" for i in range(len(texts))]})
    pq.write_table(table, path, row_group_size=7)
    check(pq.ParquetFile(path).num_row_groups > 1, f"{path} has a single row group")


with tempfile.TemporaryDirectory() as work:
    work = Path(work)
    paragraphs = []
    for name in ("Apache-2.0", "GPL-3", "MPL-2.0"):
        text = (LICENSES / name).read_text(encoding="utf-8", errors="replace")
        paragraphs += [p.strip() for p in text.split("\n\n") if p.strip()]
    rows = paragraphs[:40] + [None, ""] + paragraphs[40:80]  # a null and an empty document
    folder = work / "parquet"
    write_parquet(folder / "part-0.parquet", rows)
    write_parquet(folder / "part-1" / "more.parquet", paragraphs[80:150])
    write_parquet(folder / "part-1.parquet", paragraphs[150:])

    # tools/tokenize on the folder (a small BPE tokenizer trained on the way).
    ours = work / "ours"
    result = tokenize("--tokenizer", "bpe:300", "--text-key", "content", "--output", ours, folder)
    check(result.returncode == 0, f"tools/tokenize failed: {result.stderr}")
    tokenizer_json = (ours / "tokenizer.json").resolve()

    # datatrove reads the same folder and tokenizes with the same tokenizer.
    theirs = work / "theirs"
    reader = ParquetReader(str(folder), text_key="content", id_key="id")
    DocumentTokenizer(output_folder=str(theirs), tokenizer_name_or_path=str(tokenizer_json), eos_token="<|endoftext|>",
                      save_filename="tokens", shuffle_documents=False).run(reader.run(rank=0, world_size=1), 0, 1)
    their_files = sorted(theirs.glob("*.ds"))
    check(len(their_files) == 1, f"datatrove wrote {their_files}")
    ds = their_files[0]
    for suffix in ("", ".index", ".metadata"):
        same = Path(f"{ds}{suffix}").read_bytes() == (ours / f"tokens.ds{suffix}").read_bytes()
        check(same, f"the .ds{suffix} files differ")
    documents = len((ours / "tokens.ds.index").read_bytes()) // 8
    check(documents == len(paragraphs), f"{documents} documents written, {len(paragraphs)} non-empty rows")

    # Refusals name the file and what was expected.
    refused = tokenize("--tokenizer", "byte", "--output", work / "refused", folder / "part-1.parquet")
    expected = f"{folder / 'part-1.parquet'}: no column 'text' (see --text-key); its columns: id, content, url"
    check(refused.returncode != 0 and expected in refused.stderr, f"a missing column was not refused: {refused.stderr}")
    fake = work / "fake.parquet"
    fake.write_text("not parquet")
    refused = tokenize("--tokenizer", "byte", "--output", work / "refused", fake)
    check(refused.returncode != 0 and f"{fake}: not a readable Parquet file" in refused.stderr,
          f"a file that is no Parquet was not refused: {refused.stderr}")

# The metadata's human-readable count, as datatrove writes it (humanize.metric), for any count.
loader = importlib.machinery.SourceFileLoader("tokenize_tool", str(TOKENIZE))
tool = importlib.util.module_from_spec(importlib.util.spec_from_loader("tokenize_tool", loader))
loader.exec_module(tool)
counts = list(range(0, 20000)) + [10**e - 1 for e in range(1, 16)] + [10**e - 10**(e - 3) // 2 for e in range(4, 16)]
counts += [12345678 * 7**k for k in range(8)]
wrong = [c for c in counts if tool.human_count(c) != humanize.metric(c, unit="T")]
check(not wrong, f"counts written unlike datatrove: {[(c, tool.human_count(c)) for c in wrong[:5]]}")

print("datatrove parquet compatibility:", "FAILED" if failures else f"ok ({documents} documents, {len(counts)} counts)")
sys.exit(1 if failures else 0)
