/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kselftest_harness.h with this project's default timeout.
 *
 * The harness's default of 30 s is wall-clock time, which a debug kernel
 * under TCG on a loaded CI machine does not keep to (seen: older.btrfs.chain
 * timed out in CI and in a fresh make check, never in a lone run).  A test
 * here is judged by what it checks, not by its speed: every test gets
 * OVL_TEST_TIMEOUT seconds (default 900, sized for the slowest setup with
 * a wide margin), long ones ask for more with TEST_F_TIMEOUT().  A timeout
 * is only the guard against a hang; build with -DOVL_TEST_TIMEOUT=N to
 * check that a killed test leaves the next ones working.
 */
#ifndef OVL_SELFTESTS_HARNESS_H
#define OVL_SELFTESTS_HARNESS_H

#include "kselftest_harness.h"

#ifndef OVL_TEST_TIMEOUT
#define OVL_TEST_TIMEOUT 900
#endif
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT OVL_TEST_TIMEOUT

#endif /* OVL_SELFTESTS_HARNESS_H */
