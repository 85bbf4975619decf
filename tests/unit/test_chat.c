/* test_chat.c: coli-run's built-in chat formats (run/chat.c): every family of coli_family has
 * a table entry (a format, or deliberately none), each format's first and later turns exactly,
 * GLM's turn opened by the model's own end-of-turn token, Qwen3.5's trimmed message, and a
 * family without a format refused as a usage error naming it, never a crash. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"
#include "t.h"

/* What each family's first turn of "hi" is (the official templates' text, docs/coli-run.md). */
static const char *const first_hi[COLI_FAM_COUNT] = {
	[COLI_FAM_DEEPSEEK_V3] = "<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c><\xef\xbd\x9cUser"
				 "\xef\xbd\x9c>hi<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>",
	[COLI_FAM_GLM4_MOE] = "[gMASK]<sop><|user|>\nhi<|assistant|>\n",
	[COLI_FAM_QWEN3_MOE] = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
	[COLI_FAM_OLMOE] = "<|endoftext|><|user|>\nhi\n<|assistant|>\n",
	[COLI_FAM_MIXTRAL] = "<s>[INST] hi [/INST]",
	[COLI_FAM_GLM_MOE_DSA] = "[gMASK]<sop><|user|>hi<|assistant|><think>",
	[COLI_FAM_QWEN3_5_MOE] = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n",
	[COLI_FAM_DEEPSEEK_V4] = "<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c><\xef\xbd\x9cUser"
				 "\xef\xbd\x9c>hi<\xef\xbd\x9c" "Assistant\xef\xbd\x9c></think>",
};

/* chat_turn's text equals want (NULL: refused with a usage error). */
static void check_turn(const char *name, coli_family f, const char *msg, int first, const char *prev, const char *want)
{
	coli_err e = {0};
	char *got = chat_turn(f, msg, first, prev, &e);
	if (want)
		T_CHECK(name, got && !strcmp(got, want), "got '%s', want '%s' (%s)", got ? got : "(null)", want, e.msg);
	else
		T_CHECK(name, !got && e.code == COLI_EUSAGE, "got '%s', code %d", got ? got : "(null)", e.code);
	free(got);
}

static void test_every_family(void)
{
	char name[128];
	for (int f = 0; f < COLI_FAM_COUNT; f++) {
		coli_err e = {0};
		snprintf(name, sizeof(name), "chat: %s has an entry (a format or deliberately none)", coli_family_name(f));
		T_CHECK(name, chat_has_entry((coli_family)f), "add it to run/chat.c's formats[]");
		snprintf(name, sizeof(name), "chat: %s's first turn", coli_family_name(f));
		int ok = chat_check((coli_family)f, &e) == 0;
		check_turn(name, (coli_family)f, "hi", 1, NULL, ok ? first_hi[f] : NULL);
		snprintf(name, sizeof(name), "chat: %s's format is the one expected here", coli_family_name(f));
		T_CHECK(name, ok == (first_hi[f] != NULL), "chat_check %d, expected text %s", ok, first_hi[f] ? "given" : "none");
	}
}

static void test_later_turns(void)
{
	check_turn("chat: qwen3_moe's later turn after <|im_end|>", COLI_FAM_QWEN3_MOE, "x", 0, "<|im_end|>",
		   "\n<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n");
	check_turn("chat: qwen3_5_moe's later turn after <|im_end|>", COLI_FAM_QWEN3_5_MOE, "x", 0, "<|im_end|>",
		   "\n<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n<think>\n");
	check_turn("chat: glm_moe_dsa's turn after the model's <|user|> does not repeat it", COLI_FAM_GLM_MOE_DSA, "more",
		   0, "<|user|>", "more<|assistant|><think>");
	check_turn("chat: glm_moe_dsa's turn after <|endoftext|> opens with <|user|>", COLI_FAM_GLM_MOE_DSA, "more", 0,
		   "<|endoftext|>", "<|user|>more<|assistant|><think>");
	check_turn("chat: glm_moe_dsa's turn after an answer cut short opens with <|user|>", COLI_FAM_GLM_MOE_DSA, "more",
		   0, "ok", "<|user|>more<|assistant|><think>");
	check_turn("chat: a first turn is whole whatever came before", COLI_FAM_GLM_MOE_DSA, "hi", 1, "<|user|>",
		   first_hi[COLI_FAM_GLM_MOE_DSA]);
	check_turn("chat: deepseek_v3's later turn has no BOS", COLI_FAM_DEEPSEEK_V3, "x", 0, NULL,
		   "<\xef\xbd\x9cUser\xef\xbd\x9c>x<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>");
}

/* Qwen3.5's template trims the message (jinja's trim: Python's str.strip, Unicode whitespace). */
static void test_trim(void)
{
	const char *pre = "<|im_start|>user\n", *post = "<|im_end|>\n<|im_start|>assistant\n<think>\n";
	const char *cases[][2] = {
		{" \t hi there \t", "hi there"},
		{"\xe3\x80\x80\xc2\xa0" "caf\xc3\xa9\xe2\x80\x89x\xe2\x80\xa8\xc2\x85", "caf\xc3\xa9\xe2\x80\x89x"},
		{"\xe2\x80\x8b" "a\xe2\x80\x8b", "\xe2\x80\x8b" "a\xe2\x80\x8b"}, /* U+200B is not whitespace */
		{"\x1c\x1f\x0b\x0c\r", ""},
		{"\xe6\x97\xa5", "\xe6\x97\xa5"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char want[256], name[96];
		snprintf(want, sizeof(want), "%s%s%s", pre, cases[i][1], post);
		snprintf(name, sizeof(name), "chat: qwen3_5_moe trims the message as str.strip() (case %zu)", i);
		check_turn(name, COLI_FAM_QWEN3_5_MOE, cases[i][0], 1, NULL, want);
	}
	check_turn("chat: qwen3_moe keeps the message as given", COLI_FAM_QWEN3_MOE, " hi ", 1, NULL,
		   "<|im_start|>user\n hi <|im_end|>\n<|im_start|>assistant\n");
	check_turn("chat: a % in the message is text", COLI_FAM_GLM_MOE_DSA, "100%s %d", 1, NULL,
		   "[gMASK]<sop><|user|>100%s %d<|assistant|><think>");
}

static void test_refused(void)
{
	coli_err e = {0};
	coli_family none = (coli_family)COLI_FAM_COUNT;
	T_CHECK("chat: a family without a format is a usage error naming it", chat_check(none, &e) < 0 &&
		e.code == COLI_EUSAGE && strstr(e.msg, "no built-in chat format") && strstr(e.msg, "--prompt"), "%d %s",
		e.code, e.msg);
	check_turn("chat: a turn of a family without a format is refused, not a crash", none, "hi", 1, NULL, NULL);
	T_CHECK("chat: a family out of range has no entry", !chat_has_entry(none), "it has one");
}

int main(void)
{
	test_every_family();
	test_later_turns();
	test_trim();
	test_refused();
	T_EXIT();
}
