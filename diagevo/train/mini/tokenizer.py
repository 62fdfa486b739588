"""The mini world's character tokenizer and the chat template that is the model's view of a prompt.

One token per printable ASCII character and newline, plus the three markers the loop parses
(``<question>``, ``</question>``, ``\\boxed{``) as single tokens that decode as their text, and
the end-of-turn and padding tokens. The paper's prompts (Appendix J) are hundreds of characters
long; a model of 128 positions cannot read them, so the chat template keeps what a prompt says and
drops the instructions every prompt repeats: a solver prompt becomes its question, a challenger
prompt ``@`` + the weakness it names (Mode 2's cause, Mode 3's active element; nothing for free
exploration) + ``:``. The loop, the rewards and the prompts it builds stay the paper's.
"""

from __future__ import annotations

from typing import Any

from diagevo.curriculum.prompts import CHALLENGER_SYSTEM

EOS, PAD = "<|im_end|>", "<|endoftext|>"
MARKERS = ("<question>", "</question>", "\\boxed{")
CHARS = "\n" + "".join(chr(c) for c in range(32, 127))

CHAT_TEMPLATE = (
    "{%- set user = (messages | selectattr('role', 'equalto', 'user') | list)[-1]['content'] -%}"
    "{%- if messages[0]['content'] == '" + CHALLENGER_SYSTEM.replace("\n", "\\n").replace("'", "\\'") + "' -%}"
    "@{%- if 'Weakness to probe: ' in user -%}{{ user.split('Weakness to probe: ')[1].split('\\n')[0] }}"
    "{%- elif 'should still be challenging): ' in user -%}"
    "{{ user.split('should still be challenging): ')[1].split('\\n')[0] }}{%- endif -%}:"
    "{%- else -%}{{ user }}{%- endif -%}"
    "{%- for m in messages if m['role'] == 'assistant' -%}{{ m['content'] }}" + EOS + "{%- endfor -%}"
)


def challenger_prompt(cause: str | None) -> str:
    """What the template renders for a challenger request naming ``cause`` (None: free)."""
    return f"@{cause or ''}:"


def build_tokenizer() -> Any:
    """A ``PreTrainedTokenizerFast`` over :data:`CHARS` and the markers (the same ids every time)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate([PAD, EOS, "[UNK]", *CHARS])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")  # type: ignore[attr-defined]
    tok.decoder = decoders.Fuse()  # type: ignore[attr-defined]
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in (PAD, EOS)])
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in MARKERS])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=PAD, unk_token="[UNK]")
    fast.chat_template = CHAT_TEMPLATE
    fast.padding_side = "left"
    return fast
