/*
 * truecold probe guest: a freestanding x86-64 image entered through the PVH boot protocol,
 * exactly like a PVH Linux vmlinux (32-bit protected mode, paging off, %ebx = hvm_start_info).
 *
 *  1. enters long mode on static page tables in the image (first GiB), then builds identity
 *     page tables (2 MiB pages) covering max(4 GiB, end of the memory map) and switches;
 *  2. rings Phase::InitStart;
 *  3. walks the hvm_start_info memory map: checksums every entry and, for each RAM entry,
 *     touches one byte per 2 MiB (read, write the complement, read back, restore);
 *  4. wakes the application processors like Linux: per APIC id 1..n-1 an INIT IPI and two
 *     STARTUP IPIs whose vector points at a real-mode trampoline copied to 0x8000; each AP
 *     checks in on PROBE_PORT_AP with its APIC id, then counts itself in memory (so the BSP,
 *     which waits for the count, never ends the run before a check-in is recorded);
 *  5. rings Phase::Ready, reads the nonce from PORT_CHALLENGE (rep insb), echoes it on
 *     PROBE_PORT_ECHO (rep outsb), sends its summary on PROBE_PORT_SUMMARY and writes 0 to
 *     PORT_EXIT.
 * Built with SILENT (via --defsym) it spins forever without ringing (deadline tests).
 * Built with SPARSE it touches one byte per GiB instead of per 2 MiB: the large-memory backing
 * tests prove exact memory and the backing on a few touched regions without faulting in a
 * whole THP-backed guest (vmm/tests/probe_boot.rs).
 * Built with HOSTILE it is the hostile guest of vmm/probe/hostile.S (included below), which
 * attacks the VMM through the Linux guest's protocol (vmm/tests/hostile.rs).
 * Built with LINUX64 it has no PVH note and is entered at start64 through the 64-bit Linux
 * boot protocol (%rsi = boot_params; the memory map is the zero page's E820 table).
 * The port numbers and the summary layout are mirrored in vmm/src/probe.rs.
 */
    .intel_syntax noprefix

    .set PORT_DOORBELL,  0x0f10
    .set PORT_CHALLENGE, 0x0f11
    .set PORT_EXIT,      0x0f13
    .set PORT_AP,        0x0f18
    .set PORT_ECHO,      0x0f19
    .set PORT_SUMMARY,   0x0f1a
    .set PT_BASE,        0x10000      /* PML4; PDPT at +0x1000; PDs from +0x2000 */
    .set MAX_GIB,        120          /* PDs must end below the MP table at 0x9fc00 */
    .set TRAMP,          0x8000       /* SIPI vector 0x08 */
    .set AP_COUNT,       0x8100
    .set LAPIC,          0xfee00000
    .set SUMMARY_MAGIC,  0x31424f5250435425 /* "%TCPROB1" little endian */

.ifndef LINUX64
    .section .note.pvh, "a", @note
    .p2align 2
    .long 4                 /* namesz */
    .long 4                 /* descsz */
    .long 18                /* XEN_ELFNOTE_PHYS32_ENTRY */
    .asciz "Xen"
    .long pvh_start32
.endif

    .text
    .code32
    .globl pvh_start32
pvh_start32:
    cli
    cld
    mov eax, dword ptr [ebx + 40]      /* memmap_paddr (the VMM puts it low) */
    mov dword ptr [mm_ptr], eax
    mov eax, dword ptr [ebx + 48]      /* memmap_entries */
    mov dword ptr [mm_count], eax
    mov dword ptr [mm_stride], 24      /* hvm_memmap_table_entry */
    mov esp, offset stack_top

    /* long mode on the image's static tables (first GiB identity-mapped, like Linux's
       early page tables), so no loop runs before paging is on */
    mov eax, offset early_pml4
    mov cr3, eax
    mov eax, cr4
    or eax, 0x20
    mov cr4, eax
    mov ecx, 0xc0000080
    rdmsr
    or eax, 0x100
    wrmsr
    mov eax, cr0
    or eax, 0x80000001
    mov cr0, eax
    lgdt [gdt_desc]
    push 0x08
    push offset long_entry
    retf

    .code64
    /* 64-bit Linux boot protocol entry (ELF e_entry of the LINUX64 build): long mode on the
       VMM's page tables (first GiB), %rsi = boot_params with the E820 table at 0x2d0 */
    .globl start64
start64:
    cli
    cld
    movzx eax, byte ptr [rsi + 0x1e8]  /* e820_entries */
    mov dword ptr [mm_count], eax
    lea rax, [rsi + 0x2d0]
    mov dword ptr [mm_ptr], eax
    mov dword ptr [mm_stride], 20      /* boot_e820_entry */
    lgdt [gdt_desc]
    push 0x08
    mov rax, offset long_entry
    push rax
    retfq

long_entry:
    mov ax, 0x10
    mov ds, ax
    mov es, ax
    mov ss, ax
    mov fs, ax
    mov gs, ax
    mov rsp, offset stack_top

.ifdef SILENT
7:  pause
    jmp 7b
.endif

    /* map_gib = max(4, ceil(max end of memmap / 1 GiB)), at most MAX_GIB */
    mov ecx, 4
    mov edi, dword ptr [mm_ptr]
    mov edx, dword ptr [mm_count]
    mov r8d, dword ptr [mm_stride]
1:  test edx, edx
    jz 3f
    mov rax, qword ptr [rdi]
    add rax, qword ptr [rdi + 8]
    add rax, 0x3fffffff
    shr rax, 30
    cmp rax, rcx
    jbe 2f
    mov rcx, rax
2:  add rdi, r8
    dec edx
    jmp 1b
3:  cmp rcx, MAX_GIB
    jbe 4f
    mov ecx, MAX_GIB
4:
.ifdef HOSTILE
    mov ecx, MAX_GIB                   /* the hostile guest's MMIO sweep reaches far above RAM */
.endif
    mov dword ptr [map_gib], ecx

    /* identity map [0, map_gib GiB) with 2 MiB pages at PT_BASE, then switch to it */
    mov rdi, PT_BASE
    lea rcx, [rcx + 2]
    shl rcx, 9
    xor eax, eax
    rep stosq
    mov qword ptr [PT_BASE], PT_BASE + 0x1003
    mov ecx, dword ptr [map_gib]
    xor esi, esi
    mov rax, PT_BASE + 0x2003
5:  mov qword ptr [PT_BASE + 0x1000 + rsi * 8], rax
    add rax, 0x1000
    inc esi
    cmp esi, ecx
    jb 5b
    shl ecx, 9
    xor esi, esi
6:  mov rax, rsi
    shl rax, 21
    or rax, 0x83                       /* present, writable, 2 MiB page */
    mov qword ptr [PT_BASE + 0x2000 + rsi * 8], rax
    inc esi
    cmp esi, ecx
    jb 6b
    mov rax, PT_BASE
    mov cr3, rax
.ifdef HOSTILE
    jmp hostile_main
.endif

    mov dx, PORT_DOORBELL
    mov al, 1                          /* Phase::InitStart */
    out dx, al

    /* walk the memory map */
    mov r8d, dword ptr [mm_ptr]
    mov r9d, dword ptr [mm_count]
    xor r10, r10                       /* RAM bytes */
    xor r11, r11                       /* bytes touched */
    xor r12, r12                       /* checksum */
    xor r13, r13                       /* bad touches */
    mov r15d, dword ptr [map_gib]
    shl r15, 30                        /* mapped limit */
10: test r9, r9
    jz 15f
    mov rax, qword ptr [r8]
    mov rcx, qword ptr [r8 + 8]
    mov edx, dword ptr [r8 + 16]
    rol r12, 7
    xor r12, rax
    rol r12, 7
    xor r12, rcx
    rol r12, 7
    xor r12, rdx
    cmp edx, 1
    jne 14f
    add r10, rcx
    lea rdi, [rax + rcx]
    mov rsi, rax
11: cmp rsi, rdi
    jae 14f
    cmp rsi, r15
    jb 12f
    inc r13                            /* RAM beyond what the probe can map */
    jmp 14f
12: mov r14b, byte ptr [rsi]
    mov al, r14b
    not al
    mov byte ptr [rsi], al
    cmp byte ptr [rsi], al
    je 13f
    inc r13
13: mov byte ptr [rsi], r14b
    inc r11
.ifdef SPARSE
    add rsi, 0x40000000                /* TOUCH_STRIDE_SPARSE */
.else
    add rsi, 0x200000                  /* TOUCH_STRIDE */
.endif
    jmp 11b
14: mov eax, dword ptr [mm_stride]
    add r8, rax
    dec r9
    jmp 10b
15: mov qword ptr [summary + 8], r10
    mov qword ptr [summary + 16], r11
    mov qword ptr [summary + 24], r12
    mov qword ptr [summary + 32], r13
    mov eax, dword ptr [map_gib]
    mov qword ptr [summary + 48], rax

    /* wake the APs: CPUID.1:EBX[23:16] is the logical processor count the VMM set */
    mov eax, 1
    cpuid
    shr ebx, 16
    and ebx, 0xff
    mov dword ptr [ncpus], ebx
    cmp ebx, 1
    jbe 30f
    mov rsi, offset ap_tramp_start
    mov rdi, TRAMP
    mov rcx, offset ap_tramp_end
    sub rcx, rsi
    rep movsb
    mov word ptr [AP_COUNT], 0
    mov rdi, LAPIC
    mov dword ptr [rdi + 0xf0], 0x1ff  /* spurious vector register: APIC software enable */
    mov r8d, 1                         /* APIC id */
20: cmp r8d, dword ptr [ncpus]
    jae 25f
    mov eax, r8d
    shl eax, 24
    mov dword ptr [rdi + 0x310], eax
    mov dword ptr [rdi + 0x300], 0x0000c500   /* INIT, level, assert */
    call icr_wait
    mov dword ptr [rdi + 0x310], eax
    mov dword ptr [rdi + 0x300], 0x00008500   /* INIT, level, de-assert */
    call icr_wait
    mov dword ptr [rdi + 0x310], eax
    mov dword ptr [rdi + 0x300], 0x00000608   /* STARTUP, vector 0x08 */
    call icr_wait
    mov dword ptr [rdi + 0x310], eax
    mov dword ptr [rdi + 0x300], 0x00000608   /* second STARTUP, as the MP spec says */
    call icr_wait
    inc r8d
    jmp 20b
25: mov ecx, dword ptr [ncpus]
    dec ecx
    mov rdx, 0x40000000                /* bounded wait; the VMM deadline is the backstop */
26: movzx eax, word ptr [AP_COUNT]
    cmp eax, ecx
    jae 30f
    pause
    dec rdx
    jnz 26b
30: movzx eax, word ptr [AP_COUNT]
    mov qword ptr [summary + 40], rax
    mov rax, SUMMARY_MAGIC
    mov qword ptr [summary], rax

    mov dx, PORT_DOORBELL
    mov al, 2                          /* Phase::Ready */
    out dx, al
    mov rdi, offset nonce
    mov ecx, 16
    mov dx, PORT_CHALLENGE
    rep insb
    mov rsi, offset nonce
    mov ecx, 16
    mov dx, PORT_ECHO
    rep outsb
    mov rsi, offset summary
    mov ecx, 56
    mov dx, PORT_SUMMARY
    rep outsb
    mov dx, PORT_EXIT
    xor eax, eax
    out dx, al
31: hlt
    jmp 31b

/* waits until the ICR delivery-status bit clears (bounded) */
icr_wait:
    mov ecx, 0x100000
40: test dword ptr [rdi + 0x300], 0x1000
    jz 41f
    pause
    dec ecx
    jnz 40b
41: ret

    /* real-mode AP trampoline, copied to TRAMP; position independent */
    .code16
ap_tramp_start:
    cli
    xor ax, ax
    mov ds, ax
    mov eax, 1
    cpuid
    shr ebx, 24
    mov al, bl
    mov dx, PORT_AP
    out dx, al
    /* Counted only once the check-in's exit is handled: the BSP, which waits for the count,
     * then cannot end the run before the VMM has recorded this AP. */
    lock inc word ptr [AP_COUNT]
50: hlt
    jmp 50b
ap_tramp_end:
    .code64

.ifdef HOSTILE
    .include "hostile.S"
.endif

    .data
    .p2align 3
gdt:
    .quad 0
    .quad 0x00af9a000000ffff           /* 0x08: 64-bit code */
    .quad 0x00cf92000000ffff           /* 0x10: data */
gdt_end:
gdt_desc:
    .word gdt_end - gdt - 1
    .quad gdt

    .p2align 12
early_pml4:
    .quad early_pdpt + 3
    .fill 511, 8, 0
early_pdpt:
    .quad early_pd + 3
    .fill 511, 8, 0
early_pd:
    .set i, 0
    .rept 512
    .quad (i << 21) | 0x83
    .set i, i + 1
    .endr

    .bss
    .p2align 4
mm_ptr:         .long 0
mm_count:       .long 0
mm_stride:      .long 0
map_gib:        .long 0
ncpus:          .long 0
nonce:          .skip 16
summary:        .skip 64
    .p2align 4
stack:          .skip 16384
stack_top:
