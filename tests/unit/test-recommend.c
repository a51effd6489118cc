// SPDX-License-Identifier: GPL-2.0
/*
 * The recommendation rules: margin, then rounding up to what people write;
 * never below the peak, never a made-up number.
 */
#include <string.h>

#include "../tap.h"
#include "hw.h"

static int bytes_is(uint64_t v, const char *want)
{
	char buf[32];

	hw_format_bytes(v, buf, sizeof(buf));
	if (strcmp(buf, want))
		tap_diag("%llu bytes: \"%s\", want \"%s\"", (unsigned long long)v, buf, want);
	return !strcmp(buf, want);
}

int main(void)
{
	uint64_t peaks[] = { 1, 7, 99, 100, 101, 379, 1234, 65536, 1048577,
			     (uint64_t)3 << 30, UINT64_MAX / 200 };
	bool never_below = true;

	tap_plan(14);
	tap_ok(hw_round_count(379) == 380 && hw_round_count(1234) == 1300 &&
	       hw_round_count(99) == 99 && hw_round_count(100) == 100 &&
	       hw_round_count(101) == 110, "counts: two significant digits, rounded up");
	tap_ok(bytes_is(0, "0") && bytes_is(600, "600") && bytes_is(5000, "5K") &&
	       bytes_is(65536, "64K"), "bytes under 10K: K once past 1K");
	tap_ok(bytes_is(63333171, "61M") && bytes_is(1288490189, "1229M") &&
	       bytes_is(13207024435ULL, "13G"), "bytes: the largest unit with two digits, rounded up");
	tap_ok(bytes_is(HW_UNLIMITED, "infinity"), "unlimited bytes: infinity (systemd's word)");
	tap_ok(hw_recommend(HW_COUNT, 203, 25) == 260,
	       "203 descriptors, 25%%: 253.75 -> 254 -> 260");
	tap_ok(hw_recommend(HW_BYTES, 65536, 25) == 81920,
	       "64K locked, 25%%: 80K");
	tap_ok(hw_recommend(HW_EXACT, 25, 25) == 25,
	       "nice 25: exactly, a margin would grant a priority never used");
	tap_ok(hw_recommend(HW_COUNT, 203, 0) == 210 && hw_recommend(HW_COUNT, 9, 0) == 9,
	       "margin 0: rounding only");
	tap_ok(hw_recommend(HW_COUNT, 0, 25) == 0 && hw_recommend(HW_BYTES, 0, 25) == 0,
	       "a zero peak stays zero");
	for (size_t i = 0; i < sizeof(peaks) / sizeof(peaks[0]); i++)
		for (int margin = 0; margin <= 100; margin += 25) {
			never_below &= hw_recommend(HW_COUNT, peaks[i], margin) >= peaks[i];
			never_below &= hw_recommend(HW_BYTES, peaks[i], margin) >= peaks[i];
		}
	tap_ok(never_below, "never below the peak, for any peak and margin");
	tap_ok(hw_recommend(HW_BYTES, UINT64_MAX - 5, 25) == HW_UNLIMITED &&
	       hw_recommend(HW_COUNT, UINT64_MAX - 5, 25) == HW_UNLIMITED,
	       "overflow saturates to unlimited instead of wrapping");
	tap_ok(hw_recommend(HW_UNTRACKED, 5, 25) == HW_UNLIMITED,
	       "untracked limits get no value");

	/* LimitNOFILE never below 1024: redis-server will not start under 33 */
	struct hw_marks m;
	struct hw_advice a;
	int nofile = hw_limit_index("nofile");

	hw_marks_init(&m);
	m.lim[nofile].have_peak = true;
	m.lim[nofile].peak = 25;
	a = hw_limit_advice(&m, nofile, 25);
	tap_ok(a.emit && a.value == 1024 && a.raised && strstr(a.raised, "1024"),
	       "open files peak 25: 1024, the soft limit programs start with, and why");
	m.lim[nofile].peak = 2003;
	a = hw_limit_advice(&m, nofile, 25);
	tap_ok(a.emit && a.value == 2600 && !a.raised,
	       "open files peak 2003: 2600, the margin and the rounding, no floor");
	return tap_exit();
}
