/* chat.c: the built-in chat format of each family (the turn markers of its official template;
 * system prompts and tool calls are not templated). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "run.h"

typedef struct chat_fmt {
	const char *first;  /* before the first turn */
	const char *user;   /* printf format of a user turn, %s = the message */
	const char *again;  /* before later turns (after the model's end-of-turn token) */
} chat_fmt;

static const chat_fmt formats[COLI_FAM_COUNT] = {
	[COLI_FAM_DEEPSEEK_V3] = {"<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
				  "<\xef\xbd\x9cUser\xef\xbd\x9c>%s<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>"},
	[COLI_FAM_GLM4_MOE] = {"[gMASK]<sop>", "<|user|>\n%s<|assistant|>\n"},
	[COLI_FAM_QWEN3_MOE] = {"", "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n", "\n"},
	[COLI_FAM_OLMOE] = {"<|endoftext|>", "<|user|>\n%s\n<|assistant|>\n"},
	[COLI_FAM_MIXTRAL] = {"<s>", "[INST] %s [/INST]"},
};

char *chat_turn(coli_family f, const char *user, int first, coli_err *e)
{
	const chat_fmt *c = &formats[f];
	const char *pre = first ? c->first : c->again ? c->again : "";
	size_t n = strlen(pre) + strlen(c->user) + strlen(user) + 1;
	char *out = coli_malloc(n, e);
	if (!out)
		return NULL;
	int k = snprintf(out, n, "%s", pre);
	snprintf(out + k, n - (size_t)k, c->user, user);
	return out;
}
