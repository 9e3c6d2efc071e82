"""Imported first by the package: a clear MissingExtraError when the ``text`` extra is absent."""

from trainleak.errors import import_extra

TEXT_EXTRA = ("transformers", "tokenizers", "peft")
for _module in TEXT_EXTRA:
    import_extra(_module, "text", "the language-model substrate")
