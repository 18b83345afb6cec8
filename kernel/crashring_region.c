// SPDX-License-Identifier: GPL-2.0
/*
 * The reserved range: which memory the module records into, from its
 * parameters (region=SIZE@PHYS or reserve_mem=LABEL), and the checks that
 * it is memory set aside before anything is written to it. On x86 that
 * is memmap=SIZE$PHYS, on arm64 a no-map reserved-memory node, on 6.11+
 * either a reserve_mem= range.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/kernel.h>
#include <linux/ioport.h>
#include <linux/of.h>
#include <linux/of_reserved_mem.h>
#include "crashring_internal.h"
#include "crashring_compat.h"

static char *region;
module_param(region, charp, 0400);
MODULE_PARM_DESC(region, "Reserved physical range SIZE@PHYS (e.g. 16M@0x40000000), reserved with memmap=SIZE$PHYS (x86) or a no-map reserved-memory node (arm64)");

static char *reserve_mem;
module_param(reserve_mem, charp, 0400);
MODULE_PARM_DESC(reserve_mem, "Label of a reserve_mem=SIZE:ALIGN:LABEL range (6.11+)");

static int cr_parse_region(phys_addr_t *phys, u64 *size)
{
	char *at;

	*size = memparse(region, &at);
	if (*at != '@' || !*size)
		return -EINVAL;
	*phys = memparse(at + 1, &at);
	return *at ? -EINVAL : 0;
}

/* How much of [start, end] the /proc/iomem entries of one type cover. */
struct cr_cover {
	u64 next;	/* the first byte not yet counted */
	u64 bytes;
};

/*
 * Entries come in address order, a parent before its children: counting
 * only what lies past what is counted already counts nested ones once.
 */
static int cr_add_cover(struct resource *res, void *arg)
{
	struct cr_cover *c = arg;
	u64 start = max_t(u64, res->start, c->next);

	if (res->end >= start) {
		c->bytes += res->end - start + 1;
		c->next = res->end + 1;
	}
	return 0;
}

/*
 * Whether all of the range lies in /proc/iomem entries of type @desc.
 * region_intersects() would not do: it counts a hole with no entry at
 * all as no objection, so a range running past the end of memory passed.
 */
static bool cr_range_is(unsigned long desc)
{
	struct cr_cover c = { .next = crashring.phys };

	walk_iomem_res_desc(desc, IORESOURCE_MEM, crashring.phys,
			    crashring.phys + crashring.size - 1, &c, cr_add_cover);
	return c.bytes == crashring.size;
}

#ifdef CONFIG_OF_RESERVED_MEM
/*
 * Whether the range lies in one reserved-memory node of the device tree
 * marked no-map, as the kernel took it (of_reserved_mem_lookup()): arm64's
 * way to set memory aside, as it has no memmap=. Such memory stays out of
 * the linear map and of System RAM, and /proc/iomem lists it as
 * "reserved" but, on 6.1, without IORES_DESC_RESERVED
 * (request_standard_resources(), arch/arm64/kernel/setup.c).
 */
static bool cr_range_in_no_map_node(void)
{
	struct device_node *parent = of_find_node_by_path("/reserved-memory");
	struct device_node *child;
	bool found = false;

	if (!parent)
		return false;
	for_each_available_child_of_node(parent, child) {
		struct reserved_mem *rmem = of_reserved_mem_lookup(child);

		if (rmem && of_property_read_bool(child, "no-map") &&
		    crashring.phys >= rmem->base &&
		    crashring.phys + crashring.size <= rmem->base + rmem->size) {
			of_node_put(child);
			found = true;
			break;
		}
	}
	of_node_put(parent);
	return found;
}
#else
static bool cr_range_in_no_map_node(void)
{
	return false;
}
#endif

/* Whether the range is memory firmware or the boot set aside. */
static bool cr_range_is_reserved(void)
{
	return cr_range_is(IORES_DESC_RESERVED) || cr_range_in_no_map_node();
}

/* How a user reserves the range on this architecture, after a refusal. */
static void cr_say_how_to_reserve(phys_addr_t phys, u64 size)
{
	if (IS_ENABLED(CONFIG_ARM64))
		pr_err("reserve %pa+%llu with a reserved-memory node marked no-map in the device tree, or use reserve_mem= (6.11+)\n",
		       &phys, size);
	else
		pr_err("reserve %pa+%llu with memmap=%llu$%pa\n", &phys, size, size, &phys);
}

/*
 * A region= range must be memory set aside for us before anything is
 * written to it: page-aligned, wholly inside firmware-reserved memory
 * (memmap=SIZE$ADDR), legacy persistent memory (memmap=SIZE!ADDR) or an
 * NVDIMM's persistent memory, and claimable, so that no driver (a pmem
 * namespace, say) is using it. System RAM, ACPI tables and NVS, MMIO and
 * holes are refused with what /proc/iomem would show.
 */
static int cr_claim_region(void)
{
	phys_addr_t phys = crashring.phys;
	u64 size = crashring.size;
	bool reserved;

	if (!PAGE_ALIGNED(phys) || !PAGE_ALIGNED(size) || phys + size < phys) {
		pr_err("region=%s: address and size must be multiples of %lu bytes\n", region,
		       PAGE_SIZE);
		return -EINVAL;
	}
	if (region_intersects(phys, size, IORESOURCE_SYSTEM_RAM, IORES_DESC_NONE) !=
	    REGION_DISJOINT) {
		pr_err("region %pa+%llu overlaps System RAM in use\n", &phys, size);
		cr_say_how_to_reserve(phys, size);
		return -EBUSY;
	}
	reserved = cr_range_is_reserved();
	if (!reserved && !cr_range_is(IORES_DESC_PERSISTENT_MEMORY_LEGACY) &&
	    !cr_range_is(IORES_DESC_PERSISTENT_MEMORY)) {
		pr_err("region %pa+%llu is not wholly reserved or persistent memory in /proc/iomem (MMIO, ACPI, a hole, or a mix)\n",
		       &phys, size);
		cr_say_how_to_reserve(phys, size);
		return -EINVAL;
	}
	if (!request_mem_region(phys, size, "crashring")) {
		pr_err("region %pa+%llu is in use by another driver (see /proc/iomem), e.g. a pmem namespace\n",
		       &phys, size);
		return -EBUSY;
	}
	crashring.claimed = true;
	crashring.pmem = !reserved;
	return 0;
}

void crashring_release_region(void)
{
	if (crashring.claimed)
		release_mem_region(crashring.phys, crashring.size);
	crashring.claimed = false;
}

/**
 * crashring_find_range - find and claim the range the parameters name
 *
 * Sets crashring.phys, .size and .source, and for region= claims the
 * range (undone by crashring_release_region()).
 *
 * Return: 0, or a negative errno after saying why in the log.
 */
int crashring_find_range(void)
{
	if (region && reserve_mem) {
		pr_err("give region= or reserve_mem=, not both\n");
		return -EINVAL;
	}
	if (region) {
		if (cr_parse_region(&crashring.phys, &crashring.size)) {
			pr_err("region=%s: expected SIZE@PHYS, e.g. 16M@0x40000000\n", region);
			return -EINVAL;
		}
		crashring.source = "region";
		return cr_claim_region();
	}
	if (reserve_mem) {
		phys_addr_t start, size;

		if (!CR_HAVE_RESERVE_MEM) {
			pr_err("reserve_mem= needs Linux 6.11 or later; use memmap= and region=\n");
			return -EOPNOTSUPP;
		}
		if (!cr_reserve_mem_find(reserve_mem, &start, &size)) {
			pr_err("no reserve_mem range labelled \"%s\" (boot with reserve_mem=SIZE:ALIGN:%s)\n",
			       reserve_mem, reserve_mem);
			return -ENOENT;
		}
		/*
		 * reserve_mem=SIZE:ALIGN aligns the range to ALIGN only (64, say):
		 * its page-aligned part is used, as region= must be page-aligned,
		 * so that every slot and user stream starts on a page of its own.
		 */
		crashring.phys = PAGE_ALIGN(start);
		crashring.size = round_down(start + size, PAGE_SIZE);
		if (crashring.size <= crashring.phys) {
			pr_err("reserve_mem range %pa+%pa holds no whole page\n", &start, &size);
			return -EINVAL;
		}
		crashring.size -= crashring.phys;
		if (crashring.phys != start || crashring.size != size)
			pr_warn("reserve_mem range %pa+%pa is not page-aligned: using %pa+%llu\n",
				&start, &size, &crashring.phys, crashring.size);
		crashring.source = "reserve_mem";
		return 0;
	}
	pr_err("no memory given: load with region=SIZE@PHYS or reserve_mem=LABEL\n");
	return -EINVAL;
}
