// SPDX-License-Identifier: GPL-2.0
/*
 * The ras source: hardware errors as typed events (FORMAT.md section 9:
 * mce, memory_failure, aer, and hw_error for the other RAS tracepoints:
 * EDAC's mc_event, the firmware records' non_standard_event, arm_event and
 * extlog_mem_event), from the kernel's RAS tracepoints and, for a machine
 * check that brings the kernel down, from the banks themselves.
 *
 * mce_record fires in mce_early_notifier() (arch/x86/kernel/cpu/mce/core.c),
 * on the decoder chain that mce_gen_pool_process() runs from a work item
 * queued by mce_log(). A fatal machine check panics long before:
 * do_machine_check() -> mce_panic() -> panic(), in the exception handler,
 * so the tracepoint never sees the error that killed the machine. Its
 * banks still hold it then (do_machine_check() clears them only on its
 * way out, mce_clear_state()), so the panic path reads every valid bank of
 * the panicking CPU while MCG_STATUS.MCIP says a machine check is in
 * progress, and records each as an mce event of origin MCE_FROM_PANIC,
 * just before the crash record.
 *
 * The other fatal paths leave less. memory_failure() (mm/memory-failure.c)
 * panics as its first statement when vm.memory_failure_recovery is 0,
 * before it looks at the page and before action_result() fires
 * memory_failure_event: its panic message, "Memory failure on page %lx",
 * is the whole record, and the readers name the crash by it. The AER
 * driver never panics (drivers/pci/pcie/aer.c: pcie_do_recovery() resets
 * the link and logs a failed recovery). Firmware-first errors panic in
 * __ghes_panic() (drivers/acpi/apei/ghes.c), called from ghes_proc() before
 * ghes_do_proc() fires the tracepoints; it prints the error status first
 * ("[Hardware Error]: " lines), which the printk source records.
 *
 * A storm of corrected errors (a failing DIMM can log thousands a second)
 * must not push the kernel's history out of the ring: each CPU lets in
 * ras_events_per_sec events in each second and counts the rest, which it
 * writes as a suppressed event before the next one it lets in; the panic
 * path writes what every CPU still holds.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/percpu.h>
#include <linux/string.h>
#include <linux/tracepoint.h>
/* Trace headers, each naming its own include file: only their declarations are used. */
#include <ras/ras_event.h>
#ifdef CR_HAVE_TRACE_MEMORY_FAILURE_H
#undef TRACE_INCLUDE_FILE
#include <trace/events/memory-failure.h>
#endif
#ifdef CONFIG_X86_MCE
#undef TRACE_INCLUDE_FILE
#include <trace/events/mce.h>
#include <asm/mce.h>
#include <asm/msr.h>
#include <asm/processor.h>
#ifdef CR_HAVE_ASM_CPUID_API
#include <asm/cpuid/api.h>	/* cpuid_eax(): here, not in processor.h, in 7.3 */
#endif
#endif
#include "crashring.h"
#include "crashring_emit.h"

static unsigned int ras_events_per_sec = 100;
module_param(ras_events_per_sec, uint, 0400);
MODULE_PARM_DESC(ras_events_per_sec,
		 "Hardware-error events each CPU records per second; the rest are counted (default 100)");

struct cr_ras_budget {
	u64 second;		/* the second of the monotonic clock counted in */
	unsigned int used;	/* events let in during it */
	atomic64_t suppressed;	/* kept out and not yet written; the panic path takes it too */
};

static DEFINE_PER_CPU(struct cr_ras_budget, cr_ras_budget);

/*
 * Records a suppressed event for @count events this source kept out,
 * stamped @at (0: now). The panic path passes its own time: it must not
 * read the clocksource once the other CPUs are stopped (crashring_clock.c).
 */
static void cr_ras_suppressed(u64 count, u64 at)
{
	struct {
		char source[16];
		u64 count;
	} __packed rec = { .source = "ras", .count = count };

	cr_emit_at(at, CRASHRING_EVENT_SUPPRESSED, &rec, sizeof(rec), NULL, 0, -1);
}

/*
 * Whether this CPU may record another hardware-error event now; if so,
 * first writes what it kept out before. Probes run with preemption off,
 * so the CPU's budget is theirs; an event nested in another (an
 * interrupt's AER report inside a probe) can at worst miscount one.
 */
static bool cr_ras_admit(void)
{
	struct cr_ras_budget *b = this_cpu_ptr(&cr_ras_budget);
	u64 second = ktime_get_mono_fast_ns() >> 30;	/* 1.07 s: no division */
	u64 kept_out;

	if (b->second != second) {
		b->second = second;
		b->used = 0;
	}
	if (b->used >= ras_events_per_sec) {
		atomic64_inc(&b->suppressed);
		return false;
	}
	b->used++;
	kept_out = atomic64_xchg(&b->suppressed, 0);
	if (kept_out)
		cr_ras_suppressed(kept_out, 0);
	return true;
}

static void cr_memory_failure_probe(void *data, unsigned long pfn, int type, int result)
{
#undef EM
#undef EMe
#define EM(a, b) \
	[a] = b,
#define EMe(a, b) \
	[a] = b,
	/* The kernel's own names, from its header: the enum changes between releases. */
	static const char *const page_types[] = { MF_PAGE_TYPE };
	const char *page = type >= 0 && type < ARRAY_SIZE(page_types) && page_types[type] ?
			   page_types[type] : "unknown page type";
	struct {
		u64 pfn;
		u32 type;
		u32 result;
	} __packed rec = { pfn, type, result };

	if (cr_ras_admit())
		cr_emit(CRASHRING_EVENT_MEMORY_FAILURE, &rec, sizeof(rec), page, strlen(page), -1);
}

/*
 * aer_event's TLP header log: struct aer_header_log_regs's four dwords on
 * older kernels (Debian's 6.1), the first four of struct pcie_tlp_log's
 * dw[] on newer ones; newer still (7.3) pass a bus_type after it (Kbuild).
 */
#ifdef CR_AER_HEADER_LOG_REGS
#define CR_AER_TLP struct aer_header_log_regs
#define CR_AER_DW(t) { (t)->dw0, (t)->dw1, (t)->dw2, (t)->dw3 }
#else
#define CR_AER_TLP struct pcie_tlp_log
#define CR_AER_DW(t) { (t)->dw[0], (t)->dw[1], (t)->dw[2], (t)->dw[3] }
#endif

/* Appends @size bytes at @src to @buf, at *@len. */
static void cr_put(u8 *buf, u32 *len, const void *src, u32 size)
{
	memcpy(buf + *len, src, size);
	*len += size;
}

static void cr_aer_record(const char *dev_name, u32 status, u8 severity, u8 tlp_valid,
			  CR_AER_TLP *tlp)
{
	/* Two variable fields (the device, then the header): packed by hand. */
	u8 rec[sizeof(u32) + 2 + 2 + 32 + 2 + 4 * sizeof(u32)];
	const char *dev = dev_name ? dev_name : "";
	u16 n = strnlen(dev, 32), tlp_len = tlp_valid && tlp ? 4 * sizeof(u32) : 0;
	u32 len = 0;

	if (!cr_ras_admit())
		return;
	cr_put(rec, &len, &status, sizeof(status));
	cr_put(rec, &len, &severity, 1);
	cr_put(rec, &len, &tlp_valid, 1);
	cr_put(rec, &len, &n, sizeof(n));
	cr_put(rec, &len, dev, n);
	cr_put(rec, &len, &tlp_len, sizeof(tlp_len));
	if (tlp_len) {
		u32 dw[4] = CR_AER_DW(tlp);

		cr_put(rec, &len, dw, sizeof(dw));
	}
	cr_emit(CRASHRING_EVENT_AER, rec, len, NULL, 0, -1);
}

#ifdef CR_AER_BUS_TYPE
static void cr_aer_probe(void *data, const char *dev_name, const u32 status, const u8 severity,
			 const u8 tlp_valid, CR_AER_TLP *tlp, const char *bus_type)
#else
static void cr_aer_probe(void *data, const char *dev_name, const u32 status, const u8 severity,
			 const u8 tlp_valid, CR_AER_TLP *tlp)
#endif
{
	cr_aer_record(dev_name, status, severity, tlp_valid, tlp);
}

/* hw_error's fixed fields, as FORMAT.md's table has them. */
struct cr_hw_error {
	u8 source;
	u8 severity;
	u8 grain;
	u32 count;
	s32 cpu;
	u32 layers;
	u32 sequence;
	u64 address;
	u64 syndrome;
} __packed;

/* What hw_error keeps of its variable fields at most. */
#define CR_HW_LABEL	32
#define CR_HW_MESSAGE	96
#define CR_HW_DATA	256

/* Appends a str or bytes field: its u16 length, then @n bytes at @src. */
static void cr_put_var(u8 *buf, u32 *len, const void *src, u16 n)
{
	cr_put(buf, len, &n, sizeof(n));
	if (n)
		cr_put(buf, len, src, n);
}

/*
 * Records a hw_error: @h, then the section type and FRU id GUIDs (either
 * may be NULL), the label, the message (@msg, then "; " and @detail when
 * there is one) and @data_len bytes of @data, each cut to what the
 * format's table promises.
 */
static void cr_hw_error_record(const struct cr_hw_error *h, const guid_t *section,
			       const guid_t *fru_id, const char *label, const char *msg,
			       const char *detail, const void *data, u32 data_len)
{
	/* The message's terminating NUL takes the last byte's room. */
	u8 rec[sizeof(*h) + 5 * sizeof(u16) + 2 * sizeof(guid_t) + CR_HW_LABEL + CR_HW_MESSAGE + 1 +
	       CR_HW_DATA];
	u32 len = 0;
	u16 n;

	if (!cr_ras_admit())
		return;
	cr_put(rec, &len, h, sizeof(*h));
	cr_put_var(rec, &len, section, section ? sizeof(*section) : 0);
	cr_put_var(rec, &len, fru_id, fru_id ? sizeof(*fru_id) : 0);
	cr_put_var(rec, &len, label, label ? strnlen(label, CR_HW_LABEL) : 0);
	/* Formatted in place, after its length. */
	n = scnprintf(rec + len + sizeof(n), CR_HW_MESSAGE + 1, "%s%s%s", msg ?: "",
		      msg && detail && *detail ? "; " : "", detail ?: "");
	memcpy(rec + len, &n, sizeof(n));
	len += sizeof(n) + n;
	cr_put_var(rec, &len, data, data ? min_t(u32, data_len, CR_HW_DATA) : 0);
	cr_emit(CRASHRING_EVENT_HW_ERROR, rec, len, NULL, 0, -1);
}

/* A byte of mc_event's layers: -1 (no such layer) as 0xff. */
#define CR_LAYER(l, shift) ((u32)(u8)(l) << (shift))

static void cr_mc_event_probe(void *data, const unsigned int err_type, const char *error_msg,
			      const char *label, const int error_count, const u8 mc_index,
			      const s8 top_layer, const s8 mid_layer, const s8 low_layer,
			      unsigned long address, const u8 grain_bits, unsigned long syndrome,
			      const char *driver_detail)
{
	struct cr_hw_error h = {
		.source = CRASHRING_HW_ERROR_EDAC,
		.severity = err_type,
		.grain = grain_bits,
		.count = error_count,
		.cpu = -1,
		.layers = CR_LAYER(mc_index, 24) | CR_LAYER(top_layer, 16) |
			  CR_LAYER(mid_layer, 8) | CR_LAYER(low_layer, 0),
		.address = address,
		.syndrome = syndrome,
	};

	cr_hw_error_record(&h, NULL, NULL, label, error_msg, driver_detail, NULL, 0);
}

static void cr_non_standard_probe(void *data, const guid_t *sec_type, const guid_t *fru_id,
				  const char *fru_text, const u8 sev, const u8 *err,
				  const u32 len)
{
	struct cr_hw_error h = {
		.source = CRASHRING_HW_ERROR_NON_STANDARD,
		.severity = sev,
		.count = 1,
		.cpu = -1,
	};

	cr_hw_error_record(&h, sec_type, fru_id, fru_text, NULL, NULL, err, len);
}

/*
 * An ARM processor error section: the section itself and, where the
 * kernel passes them, its parts after it, @parts bytes the kernel checked
 * against the section's length (log_arm_hw_error()).
 */
static void cr_arm_record(const struct cper_sec_proc_arm *proc, u32 parts, u8 sev, int cpu)
{
	struct cr_hw_error h = {
		.source = CRASHRING_HW_ERROR_ARM,
		.severity = sev,
		.count = 1,
		.cpu = cpu,
		.layers = (u32)proc->affinity_level << 24 | (proc->running_state & 0xffffff),
		.sequence = proc->psci_state,
		.address = proc->mpidr,
		.syndrome = proc->midr,
	};

	cr_hw_error_record(&h, NULL, NULL, NULL, NULL, NULL, proc, sizeof(*proc) + parts);
}

#ifdef CR_ARM_EVENT_PARTS
static void cr_arm_probe(void *data, const struct cper_sec_proc_arm *proc, const u8 *pei_err,
			 const u32 pei_len, const u8 *ctx_err, const u32 ctx_len, const u8 *oem,
			 const u32 oem_len, u8 sev, int cpu)
{
	/* The parts follow the section in one buffer (ghes_handle_arm_hw_error()). */
	cr_arm_record(proc, pei_len + ctx_len + oem_len, sev, cpu);
}
#else
static void cr_arm_probe(void *data, const struct cper_sec_proc_arm *proc)
{
	cr_arm_record(proc, 0, 255, -1);
}
#endif

static void cr_extlog_probe(void *data, struct cper_sec_mem_err *mem, u32 err_seq,
			    const guid_t *fru_id, const char *fru_text, u8 sev)
{
	struct cr_hw_error h = {
		.source = CRASHRING_HW_ERROR_EXTLOG,
		.severity = sev,
		.count = 1,
		.cpu = -1,
		.sequence = err_seq,
		.address = mem->validation_bits & CPER_MEM_VALID_PA ? mem->physical_addr : 0,
	};

	cr_hw_error_record(&h, NULL, fru_id, fru_text, NULL, NULL, mem, sizeof(*mem));
}

#ifdef CONFIG_X86_MCE
/* The mce event's payload, field by field as FORMAT.md's table has it. */
struct cr_mce_rec {
	u8 origin;
	u8 bank;
	u8 severity;
	u8 cpuvendor;
	u32 cpu;
	u64 status;
	u64 addr;
	u64 misc;
	u64 synd;
	u64 ipid;
	u64 mcgstatus;
	u64 mcgcap;
	u64 ip;
	u8 cs;
	u64 tsc;
	u64 walltime;
	u32 cpuid;
	u32 apicid;
	u32 socketid;
	u32 microcode;
	u64 ppin;
} __packed;

static void cr_mce_record(const struct mce *m)
{
	struct cr_mce_rec rec = {
		.origin = CRASHRING_MCE_FROM_TRACEPOINT,
		.bank = m->bank,
		.severity = m->severity,
		.cpuvendor = m->cpuvendor,
		.cpu = m->extcpu,
		.status = m->status,
		.addr = m->addr,
		.misc = m->misc,
		.synd = m->synd,
		.ipid = m->ipid,
		.mcgstatus = m->mcgstatus,
		.mcgcap = m->mcgcap,
		.ip = m->ip,
		.cs = m->cs,
		.tsc = m->tsc,
		.walltime = m->time,
		.cpuid = m->cpuid,
		.apicid = m->apicid,
		.socketid = m->socketid,
		.microcode = m->microcode,
		.ppin = m->ppin,
	};

	if (cr_ras_admit())
		cr_emit(CRASHRING_EVENT_MCE, &rec, sizeof(rec), NULL, 0, -1);
}

#ifdef CR_HAVE_MCE_HW_ERR
static void cr_mce_probe(void *data, struct mce_hw_err *err)
{
	cr_mce_record(&err->m);
}
#else
static void cr_mce_probe(void *data, struct mce *m)
{
	cr_mce_record(m);
}
#endif

#ifdef CR_HAVE_RDMSRQ
#define cr_rdmsr_safe(msr, val) rdmsrq_safe(msr, val)
#else
#define cr_rdmsr_safe(msr, val) rdmsrl_safe(msr, val)
#endif

/* Bank @i's register @reg (0 status, 1 addr, 2 misc), where this CPU has it. */
/*
 * The banks MCG_CAP counts, at most the kernel's and, in the legacy
 * numbering, at most the 32 whose registers lie at 0x400..0x47f: past
 * them are other registers (VMX capabilities at 0x480).
 */
static unsigned int cr_bank_count(u64 cap)
{
	unsigned int most = boot_cpu_has(X86_FEATURE_SMCA) ? MAX_NR_BANKS : 32;

	return min_t(u64, cap & MCG_BANKCNT_MASK, most);
}

static u32 cr_bank_msr(unsigned int i, unsigned int reg)
{
	static const u32 legacy[] = { MSR_IA32_MC0_STATUS, MSR_IA32_MC0_ADDR, MSR_IA32_MC0_MISC };

	if (boot_cpu_has(X86_FEATURE_SMCA))
		return (reg == 0 ? MSR_AMD64_SMCA_MC0_STATUS : reg == 1 ? MSR_AMD64_SMCA_MC0_ADDR :
			MSR_AMD64_SMCA_MC0_MISC0) + 0x10 * i;
	return legacy[reg] + 4 * i;
}

/* Records this CPU's valid banks if a machine check is in progress on it. */
static void cr_mce_banks_at_panic(u64 at)
{
	struct cr_mce_rec rec = {
		.origin = CRASHRING_MCE_FROM_PANIC,
		.cpuvendor = boot_cpu_data.x86_vendor,
		.cpu = raw_smp_processor_id(),
		.cpuid = cpuid_eax(1),
		.microcode = boot_cpu_data.microcode,
	};
	u64 cap, addr, misc;
	unsigned int i;

	if (!boot_cpu_has(X86_FEATURE_MCE) || !boot_cpu_has(X86_FEATURE_MCA) ||
	    cr_rdmsr_safe(MSR_IA32_MCG_STATUS, &rec.mcgstatus) ||
	    !(rec.mcgstatus & MCG_STATUS_MCIP) || cr_rdmsr_safe(MSR_IA32_MCG_CAP, &cap))
		return;
	rec.mcgcap = cap;
	for (i = 0; i < cr_bank_count(cap); i++) {
		if (cr_rdmsr_safe(cr_bank_msr(i, 0), &rec.status) || !(rec.status & MCI_STATUS_VAL))
			continue;
		rec.bank = i;
		rec.addr = (rec.status & MCI_STATUS_ADDRV) && !cr_rdmsr_safe(cr_bank_msr(i, 1), &addr) ?
			   addr : 0;
		rec.misc = (rec.status & MCI_STATUS_MISCV) && !cr_rdmsr_safe(cr_bank_msr(i, 2), &misc) ?
			   misc : 0;
		cr_emit_at(at, CRASHRING_EVENT_MCE, &rec, sizeof(rec), NULL, 0, -1);
	}
}
#endif /* CONFIG_X86_MCE */

/**
 * crashring_ras_panic - what the ras source owes the crash record
 * @at: the crash's time
 *
 * Called on the panic path, before the crash record, on the panicking CPU:
 * writes what every CPU's budget kept out and, for a machine check, the
 * banks that hold it.
 */
void crashring_ras_panic(u64 at)
{
	u64 kept_out = 0;
	int cpu;

	if (!(READ_ONCE(crashring.sources) & CR_SRC_RAS))
		return;
	for_each_possible_cpu(cpu)
		kept_out += atomic64_xchg(&per_cpu(cr_ras_budget, cpu).suppressed, 0);
	if (kept_out)
		cr_ras_suppressed(kept_out, at);
#ifdef CONFIG_X86_MCE
	cr_mce_banks_at_panic(at);
#endif
}

/*
 * Each probe's type checked against the kernel's own declaration, in an
 * expression never evaluated: a prototype that changes in a new release
 * fails the build (which fails on any warning) instead of recording junk.
 */
static void __maybe_unused cr_ras_probe_types(void)
{
	(void)sizeof(register_trace_memory_failure_event(cr_memory_failure_probe, NULL));
	(void)sizeof(register_trace_aer_event(cr_aer_probe, NULL));
	(void)sizeof(register_trace_mc_event(cr_mc_event_probe, NULL));
	(void)sizeof(register_trace_non_standard_event(cr_non_standard_probe, NULL));
	(void)sizeof(register_trace_arm_event(cr_arm_probe, NULL));
#if IS_ENABLED(CONFIG_ACPI_EXTLOG)
	/* Declared only where the extlog driver is built: x86. */
	(void)sizeof(register_trace_extlog_mem_event(cr_extlog_probe, NULL));
#endif
#ifdef CONFIG_X86_MCE
	(void)sizeof(register_trace_mce_record(cr_mce_probe, NULL));
#endif
}

static struct crashring_probe cr_ras_probes[] = {
	{ .tracepoint = "memory_failure_event", .probe = cr_memory_failure_probe },
	{ .tracepoint = "aer_event", .probe = cr_aer_probe },
	{ .tracepoint = "mc_event", .probe = cr_mc_event_probe },
	{ .tracepoint = "non_standard_event", .probe = cr_non_standard_probe },
	{ .tracepoint = "arm_event", .probe = cr_arm_probe },
	{ .tracepoint = "extlog_mem_event", .probe = cr_extlog_probe },
#ifdef CONFIG_X86_MCE
	{ .tracepoint = "mce_record", .probe = cr_mce_probe },
#endif
};

const struct crashring_source crashring_source_ras = {
	.name = "ras",
	.probes = cr_ras_probes,
	.nprobes = ARRAY_SIZE(cr_ras_probes),
};
