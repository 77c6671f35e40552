"""SentencePiece tokenizers saved the way Goldfish models ship theirs.

A unigram SentencePiece model is trained on the training verses only (never
a held-out one) and saved as an ALBERT tokenizer: ``spiece.model`` plus
transformers' ``tokenizer.json`` / ``tokenizer_config.json`` with
``tokenizer_class: AlbertTokenizer``, ids 0 ``<pad>``, 1 ``<unk>``,
2 ``[CLS]``, 3 ``[SEP]``, 4 ``[MASK]``; encoding a verse gives
``[CLS] pieces [SEP]``, no lower-casing, accents kept.
"""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterable
from pathlib import Path

from interlingua.zoo.errors import ZooError

__all__ = ["TOKENIZER_FILES", "copy_tokenizer", "load_tokenizer", "train_tokenizer"]

#: Files of a saved zoo tokenizer (copied into every checkpoint folder).
TOKENIZER_FILES: tuple[str, ...] = ("spiece.model", "tokenizer.json", "tokenizer_config.json")
SPECIALS = {"pad": "<pad>", "unk": "<unk>", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}


def train_tokenizer(texts: Iterable[str], folder: Path, *, vocab_size: int, seed: int, max_length: int) -> Path:
    """Train a unigram SentencePiece model on ``texts`` and save it ALBERT-style into ``folder``.

    Deterministic: one thread, the input in the given order, a fixed random
    seed. Raises :class:`ZooError` when the text cannot support
    ``vocab_size`` pieces.
    """
    import sentencepiece as spm
    from transformers import AlbertTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    texts = [t for t in texts if t.strip()]
    spm.set_random_generator_seed(int(seed))
    model = io.BytesIO()  # written from memory: a model_prefix would record the (temporary) path
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(texts),
            model_writer=model,
            vocab_size=int(vocab_size),
            model_type="unigram",
            character_coverage=1.0,
            pad_id=0,
            unk_id=1,
            bos_id=-1,
            eos_id=-1,
            pad_piece=SPECIALS["pad"],
            unk_piece=SPECIALS["unk"],
            user_defined_symbols=[SPECIALS["cls"], SPECIALS["sep"], SPECIALS["mask"]],
            input_sentence_size=0,
            shuffle_input_sentence=False,
            num_threads=1,
            minloglevel=2,
        )
    except RuntimeError as exc:
        raise ZooError(
            f"SentencePiece could not train a {vocab_size}-piece vocabulary on {len(texts)} verses "
            f"({str(exc).strip().splitlines()[-1]}); use a smaller vocab_size or more books"
        ) from None
    (folder / "spiece.model").write_bytes(model.getvalue())
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    pieces = [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]
    # Built from the pieces: converting spiece.model by file would need protobuf at build time.
    tokenizer = AlbertTokenizer(vocab=pieces, do_lower_case=False, keep_accents=True, model_max_length=int(max_length))
    tokenizer.save_pretrained(folder)
    return folder


def load_tokenizer(folder: Path):
    """The saved tokenizer through ``AutoTokenizer`` (the path ``load_model`` takes)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))


def copy_tokenizer(source: Path, folder: Path) -> None:
    """Copy a saved tokenizer's files into ``folder`` (a checkpoint folder)."""
    folder.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.iterdir()):
        if path.is_file():
            shutil.copyfile(path, folder / path.name)


def encode(tokenizer, texts: list[str], max_length: int) -> list[list[int]]:
    """``[CLS] pieces [SEP]`` ids of each text, truncated to ``max_length`` tokens."""
    batch = tokenizer(texts, truncation=True, max_length=max_length, add_special_tokens=True)
    return [list(ids) for ids in batch["input_ids"]]
