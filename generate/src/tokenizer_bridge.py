# The tokenizer side of `triax generate`, run by text_tokenizer.cpp with the project's Python: Hugging
# Face's `tokenizers` library reads the model's tokenizer.json, the same library that wrote it (and
# that transformers uses), so ids and text match theirs exactly.
#
# One request as JSON on stdin, one answer as JSON on stdout:
#   {"tokenizer": PATH, "encode": [TEXT...], "add_special_tokens": BOOL, "decode": [[ID...]...]}
#   -> {"ids": [[ID...]...], "texts": [TEXT...], "vocab_size": N, "eos": [ID...], "eos_token": NAME}
# A failure is {"error": MESSAGE} and exit status 1.
import json
import sys

# Names of end-of-text tokens, in the order they are looked for.
END_TOKENS = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>")


def answer(request):
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise RuntimeError(f"the Python package 'tokenizers' is missing from {sys.executable} "
                           "(run tools/setup.sh, or point TRIAX_PYTHON at a Python that has it)")
    path = request["tokenizer"]
    try:
        tokenizer = Tokenizer.from_file(path)
    except Exception as e:  # the library's own message names what is wrong with the file
        raise RuntimeError(f"{path}: not a tokenizer.json the tokenizers library reads: {e}")
    add_special = bool(request.get("add_special_tokens", True))
    out = {"vocab_size": tokenizer.get_vocab_size(), "eos": [], "eos_token": ""}
    out["ids"] = [tokenizer.encode(text, add_special_tokens=add_special).ids for text in request.get("encode", [])]
    out["texts"] = [tokenizer.decode(ids, skip_special_tokens=True) for ids in request.get("decode", [])]
    for name in END_TOKENS:
        found = tokenizer.token_to_id(name)
        if found is not None:
            out["eos"], out["eos_token"] = [found], name
            break
    return out


def main():
    try:
        json.dump(answer(json.load(sys.stdin)), sys.stdout)
    except Exception as e:
        json.dump({"error": str(e)}, sys.stdout)
        sys.exit(1)


if __name__ == "__main__":
    main()
