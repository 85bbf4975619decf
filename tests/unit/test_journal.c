/* test_journal.c: convert.journal read back field by field, and one malformed journal per rule
 * of journal.h, each refused naming the field. */
#include <stdio.h>
#include <string.h>

#include "journal.h"
#include "t.h"

#define H64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define GOOD "{\"identity\":\"" H64 "\",\"source\":\"" H64 "\",\"allow_nonfinite\":false,\"jobs\":8,\"next_job\":4," \
	"\"codes_crc\":4294967295,\"scales_crc\":7,\"tensor_crc\":[1,2,3],\"record_crc\":[4,5]}"

static void good(void)
{
	coli_journal j;
	coli_err e = {0, ""};
	int rc = coli_journal_parse(GOOD, strlen(GOOD), "convert.journal", &j, &e);
	T_CHECK("journal: a valid journal is read", rc == 0 && j.jobs == 8 && j.next_job == 4 &&
		j.codes_crc == 0xffffffffu && j.scales_crc == 7 && j.n_tensor_crc == 3 && j.tensor_crc[2] == 3 &&
		j.n_record_crc == 2 && j.record_crc[1] == 5 && !j.allow_nonfinite && !strcmp(j.identity, H64),
		"rc %d: %s", rc, e.msg);
	coli_journal_release(&j);
}

/* GOOD with from replaced by to must be refused naming field. */
static void bad(const char *from, const char *to, const char *field)
{
	char text[1024], name[160];
	const char *at = strstr(GOOD, from);
	snprintf(text, sizeof(text), "%.*s%s%s", at ? (int)(at - GOOD) : 0, GOOD, to, at ? at + strlen(from) : "");
	coli_journal j;
	coli_err e = {0, ""};
	int rc = at ? coli_journal_parse(text, strlen(text), "convert.journal", &j, &e) : 0;
	snprintf(name, sizeof(name), "journal: refused: %s -> %s", from, to);
	T_CHECK(name, rc < 0 && e.code == COLI_EDATA && strstr(e.msg, "convert.journal") && strstr(e.msg, field),
		"rc %d: %s", rc, e.msg);
}

int main(void)
{
	good();
	bad("{\"identity\"", "[\"identity\"", "unreadable journal");
	bad("\"identity\":\"0", "\"identity\":\"X", "identity");
	bad("\"source\":\"" H64 "\",", "", "source");
	bad("\"allow_nonfinite\":false", "\"allow_nonfinite\":0", "allow_nonfinite");
	bad("\"jobs\":8", "\"jobs\":0", "jobs");
	bad("\"next_job\":4", "\"next_job\":9", "next_job");
	bad("\"next_job\":4", "\"next_job\":-1", "next_job");
	bad("\"codes_crc\":4294967295", "\"codes_crc\":4294967296", "codes_crc");
	bad("\"scales_crc\":7", "\"scales_crc\":7.5", "scales_crc");
	bad("\"tensor_crc\":[1,2,3]", "\"tensor_crc\":{}", "tensor_crc");
	bad("\"record_crc\":[4,5]", "\"record_crc\":[4,-5]", "record_crc[1]");
	bad("\"jobs\":8,", "\"jobs\":8,\"jobs\":8,", "unreadable journal");
	bad("{", "[1]", "unreadable journal");
	T_EXIT();
}
