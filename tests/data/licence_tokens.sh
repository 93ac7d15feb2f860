# Sourced by the tests that train on real text, after they set SRC (the source folder) and WORK (a
# scratch folder): the licence texts of /usr/share/common-licenses tokenized with tools/tokenize (a
# byte-level BPE tokenizer of 512 tokens trained on them, no download) into $WORK/licenses.
"$SRC/.venv/bin/python" "$SRC/tools/tokenize" --tokenizer bpe:512 --max-tokens-per-file 50000 \
  --output "$WORK/licenses" /usr/share/common-licenses 2>/dev/null
