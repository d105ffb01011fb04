"""Reference tokens for the tokenizer test: open_clip's own tokenizer on seeded strings.

    python clip_tokens.py OUT.json [--count N] [--seed S]

torch is not installed here, so open_clip/tokenizer.py (from the open_clip_torch wheel,
installed with --no-deps, plus ftfy and regex) is loaded by path with a small NumPy
stand-in for the three torch calls its tokenize() makes. Writes the strings, open_clip's
[N, 77] token ids, the vocabulary path inside the wheel, and the strings left out:
those where ftfy's mojibake repair (fix_encoding) changes the text, which the engine's
clean-up does not reproduce (docs/formats.md).
"""
import argparse
import importlib.util
import json
import random
import sys
import types

import numpy as np


def load_open_clip_tokenizer():
    torch = types.ModuleType("torch")
    torch.long = np.int64
    torch.LongTensor = np.ndarray
    torch.Tensor = np.ndarray
    torch.zeros = lambda *shape, dtype=None: np.zeros(shape, dtype=np.int64)
    torch.tensor = lambda data, dtype=None: np.asarray(data, dtype=np.int64)
    sys.modules.setdefault("torch", torch)
    spec = importlib.util.find_spec("open_clip")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("open_clip is not installed (pip install --no-deps open_clip_torch)")
    folder = list(spec.submodule_search_locations)[0]
    tspec = importlib.util.spec_from_file_location("open_clip_tokenizer", folder + "/tokenizer.py")
    mod = importlib.util.module_from_spec(tspec)
    tspec.loader.exec_module(mod)
    return mod, folder + "/bpe_simple_vocab_16e6.txt.gz"


WORDS = """a an the of on in with and or red green blue yellow black white apple mug cup bear
nose table chair plant fern leaf flower sofa lamp book photo picture cat dog teddy
kitchen window door glass bottle shoe bag car bike guitar snow miku figure wooden
metal plastic small large old new bright dark shiny soft hard left right top bottom
it's don't we're they've I'm you'll he'd O'Neil""".split()

PIECES = [
    # accents, other Latin, Greek, Cyrillic, casing oddities
    "café", "naïve", "Ångström", "Straße", "façade", "jalapeño", "Dvořák", "Łódź",
    "smørrebrød", "İstanbul", "ΣΊΣΥΦΟΣ", "Οδυσσεύς", "ΑΣ ΟΣ", "Москва", "Ёлка", "ĲSSEL",
    "e\u0301", "n\u0303o", "A\u030a", "\u1e9e", "ǅemal", "ﬁsh ﬂour ﬀ ﬃ ﬄ ﬅ ﬆ",
    # CJK, kana, Hangul, other scripts
    "赤いリンゴ", "マグカップ", "你好世界", "蘋果", "한국어 텍스트", "ｶﾀｶﾅ", "ﾊﾟﾝ",
    "مرحبا", "שלום", "नमस्ते", "สวัสดี", "Ελληνικά", "ქართული", "Հայերեն",
    # emoji (ZWJ, skin tones, flags, keycaps, variation selectors)
    "🍎", "☕", "🐻", "👩‍🔬", "👍🏽", "🇯🇵", "🇫🇷", "1️⃣", "❤️", "🏳️‍🌈", "😀😃😄", "🤖",
    # punctuation, quotes, dashes, symbols
    "“quoted”", "‘single’", "„low“", "‹›«»", "—", "–", "…", "!!!", "???", "@#$%^&*()",
    "C++", "e.g.", "3.14", "1,000", "50%", "#1", "$5", "€10", "£3", "¥100", "℃", "°F",
    "ʼn", "don’t", "it‛s", "‟x‟",
    # full width, ideographic space, compatibility forms
    "ＡＢＣ", "ｒｅｄ　ａｐｐｌｅ", "１２３", "！？", "＜ｂ＞", "￥", "￦", "ﾟ",
    # HTML entities and tags
    "&amp;", "&lt;", "&gt;", "&quot;", "&#39;", "&#x27;", "&nbsp;", "&eacute;", "&EACUTE;",
    "&Eacute;", "&copy;", "&hellip;", "&mdash;", "&amp;amp;", "&ampx", "&notit;", "&foo;",
    "&#128;", "&#x93;q&#x94;", "&#0;", "&#1;", "&#xD800;", "&#99999999;", "&#x1F34E;",
    "&lt;b&gt;", "<b>bold</b>", "<i>", "a < b", "&SZLIG;", "&szlig;", "&AMP;", "&NBSP;",
    # control characters, C1 controls, escapes, line breaks, BOM, zero widths
    "\x00", "\x07", "\x1b[31mred\x1b[0m", "\x1b[1;32m", "\x85", "\x80", "\x93hi\x94",
    "\x9d", "\r\n", "\r", "\u2028", "\u2029", "\t", "\x0b", "\x0c", "\ufeff", "\u200b",
    "\u200d", "\u2060", "\u206a", "\ufff9", "\u00ad", "\xa0", "\u3000", "\u202f",
    # numbers and digits of other scripts
    "2024", "٣", "१२३", "Ⅻ", "½", "²", "x²", "①",
    # special tokens written out
    "<start_of_text>", "<end_of_text>", "<START_OF_TEXT>",
    # UTF-8 read as Windows-1252 (mojibake): ftfy re-decodes these; they are left out
    "cafÃ©", "â€œquotedâ€\x9d", "Ã\xa0 la carte", "naÃ¯ve",
]


def realistic(rng):
    n = rng.randint(1, 6)
    words = [rng.choice(WORDS) for _ in range(n)]
    if rng.random() < 0.3:
        words[0] = words[0].capitalize()
    if rng.random() < 0.2:
        words = [w.upper() for w in words]
    return " ".join(words)


def mixed(rng):
    parts = []
    for _ in range(rng.randint(1, 6)):
        r = rng.random()
        if r < 0.45:
            parts.append(rng.choice(PIECES))
        elif r < 0.9:
            parts.append(rng.choice(WORDS))
        else:
            parts.append(chr(rng.randint(0x20, 0x2FF)))
    sep = rng.choice([" ", "", "  ", "\n", " \t", "\u3000", ", "])
    return sep.join(parts)


def long_text(rng):
    n = rng.randint(60, 160)
    return " ".join(rng.choice(WORDS + PIECES[:60]) for _ in range(n))


def generate(rng, count):
    fixed = ["", " ", "   ", "\t\n", "\u3000", "\n\n", "object", "things", "stuff", "texture",
             "red apple", "mug", "a photo of a teddy bear", "Red Apple!!", "x" * 300]
    out = list(fixed)
    while len(out) < count:
        r = rng.random()
        if r < 0.35:
            out.append(realistic(rng))
        elif r < 0.9:
            out.append(mixed(rng))
        else:
            out.append(long_text(rng))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--count", type=int, default=2400)
    ap.add_argument("--seed", type=int, default=30)
    a = ap.parse_args()
    tok, vocab = load_open_clip_tokenizer()
    import ftfy

    rng = random.Random(a.seed)
    kept, excluded = [], []
    for s in generate(rng, a.count):
        if ftfy.fix_text(s) != ftfy.fix_text(s, fix_encoding=False):
            excluded.append(s)
        else:
            kept.append(s)
    ids = tok.tokenize(kept)
    json.dump(
        {
            "vocab": vocab,
            "strings": kept,
            "tokens": np.asarray(ids).tolist(),
            "excluded": excluded,
        },
        open(a.out, "w"),
        ensure_ascii=True,
    )


if __name__ == "__main__":
    main()
