/* chat.c: the built-in chat format of each family (the turn markers of its official template;
 * system prompts and tool calls are not templated). The templates each entry follows, and the
 * choices for thinking models, are in docs/coli-run.md's "Chat" section. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "run.h"

typedef struct chat_fmt {
	const char *first;  /* before the first turn */
	const char *user;   /* printf format of a user turn, %s = the message */
	const char *again;  /* before later turns (after the model's end-of-turn token) */
	const char *opener; /* user's leading marker, left out after a last token that is it: the
			     * model ended its turn with that very token (GLM: <|user|> is an EOS id) */
	int trim;           /* the message stripped of surrounding whitespace (the template's |trim) */
	const char *none;   /* a family deliberately without a built-in format: why */
} chat_fmt;

/* Every family has an entry: a format, or `none` saying why it has none (test_chat checks). */
static const chat_fmt formats[COLI_FAM_COUNT] = {
	[COLI_FAM_DEEPSEEK_V3] = {"<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
				  "<\xef\xbd\x9cUser\xef\xbd\x9c>%s<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>"},
	[COLI_FAM_GLM4_MOE] = {"[gMASK]<sop>", "<|user|>\n%s<|assistant|>\n"},
	[COLI_FAM_QWEN3_MOE] = {"", "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n", "\n"},
	[COLI_FAM_OLMOE] = {"<|endoftext|>", "<|user|>\n%s\n<|assistant|>\n"},
	[COLI_FAM_MIXTRAL] = {"<s>", "[INST] %s [/INST]"},
	/* zai-org/GLM-5 chat_template.jinja, generation prompt at enable_thinking's default */
	[COLI_FAM_GLM_MOE_DSA] = {"[gMASK]<sop>", "<|user|>%s<|assistant|><think>", .opener = "<|user|>"},
	/* Qwen/Qwen3.5-397B-A17B and Qwen3.6-35B-A3B chat_template.jinja, the same */
	[COLI_FAM_QWEN3_5_MOE] = {"", "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n<think>\n", "\n",
				  .trim = 1},
	/* deepseek-ai/DeepSeek-V4 encoding/encoding_dsv4.py (no jinja template, no default mode):
	 * thinking_mode "chat", the answer without reasoning, as deepseek_v3's entry */
	[COLI_FAM_DEEPSEEK_V4] = {"<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
				  "<\xef\xbd\x9cUser\xef\xbd\x9c>%s<\xef\xbd\x9c" "Assistant\xef\xbd\x9c></think>"},
};

static const chat_fmt *format_of(coli_family f)
{
	return (unsigned)f < COLI_FAM_COUNT && formats[f].user ? &formats[f] : NULL;
}

int chat_check(coli_family f, coli_err *e)
{
	const char *name = (unsigned)f < COLI_FAM_COUNT ? coli_family_name(f) : "unknown";
	const char *why = (unsigned)f < COLI_FAM_COUNT ? formats[f].none : NULL;
	if (format_of(f))
		return 0;
	return coli_errf(e, COLI_EUSAGE, "--chat: coli-run has no built-in chat format for the %s family%s%s; give the "
			 "templated text with --prompt (or its ids with --prompt-ids)", name, why ? ": " : "", why ? why : "");
}

int chat_has_entry(coli_family f)
{
	return (unsigned)f < COLI_FAM_COUNT && (formats[f].user != NULL) != (formats[f].none != NULL);
}

/* Bytes of the whitespace character at s[0..n) as Python's str.isspace sees it (jinja's trim
 * is str.strip()), 0 when s does not start with one. s is valid UTF-8. */
static size_t space_len(const unsigned char *s, size_t n)
{
	if ((s[0] >= 0x09 && s[0] <= 0x0d) || (s[0] >= 0x1c && s[0] <= 0x20))
		return 1;
	if (n >= 2 && s[0] == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0)) /* U+0085, U+00A0 */
		return 2;
	if (n < 3 || (s[0] & 0xf0) != 0xe0)
		return 0;
	unsigned cp = (unsigned)(s[0] & 0x0f) << 12 | (unsigned)(s[1] & 0x3f) << 6 | (s[2] & 0x3fu);
	int sp = cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
		 cp == 0x205f || cp == 0x3000;
	return sp ? 3 : 0;
}

/* A copy of the message, without leading and trailing whitespace when the format trims it. */
static char *message(const char *s, int trim, coli_err *e)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), lo = 0, hi = n, k;
	while (trim && lo < n && (k = space_len(p + lo, n - lo)) > 0)
		lo += k;
	if (trim)
		hi = lo;
	for (size_t j = lo; trim && j < n; j += k ? k : 1) /* a continuation byte is never a space */
		if ((k = space_len(p + j, n - j)) == 0)
			hi = j + 1;
	char *out = coli_malloc(hi - lo + 1, e);
	if (out)
		memcpy(out, s + lo, hi - lo), out[hi - lo] = 0;
	return out;
}

char *chat_turn(coli_family f, const char *user, int first, const char *prev, coli_err *e)
{
	const chat_fmt *c = format_of(f);
	if (!c)
		return chat_check(f, e), NULL;
	const char *pre = first ? c->first : c->again ? c->again : "";
	const char *fmt = c->user;
	if (!first && c->opener && prev && !strcmp(prev, c->opener)) /* the model's EOS opened the turn */
		pre = "", fmt += strlen(c->opener);
	char *msg = message(user, c->trim, e);
	size_t n = msg ? strlen(pre) + strlen(fmt) + strlen(msg) + 1 : 0;
	char *out = msg ? coli_malloc(n, e) : NULL;
	if (out) {
		int k = snprintf(out, n, "%s", pre);
		snprintf(out + k, n - (size_t)k, fmt, msg);
	}
	free(msg);
	return out;
}
