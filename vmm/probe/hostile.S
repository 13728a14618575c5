/*
 * The hostile guest: probe.S built with --defsym HOSTILE=1 includes this file and jumps to
 * hostile_main once its own page tables (the first MAX_GIB GiB, identity-mapped) are live.
 * It speaks the Linux guest's protocol (doorbells, the nonce by `rep insb`, TC1 lines by
 * `rep outsb`, the exit port: proto/src/lib.rs) and abuses it; the VMM boots it as a kernel
 * file (`--kernel FILE --force`), so it is judged exactly like a Linux guest.
 *
 * What it does is chosen by the control block `hostile_ctl` below: the test finds its magic
 * ("TCHOSTL1") in the ELF and patches the quads after it before writing the image out:
 *   case  what to do (H_* below; vmm/tests/hostile.rs mirrors the numbers)
 *   arg   a count or value for the case
 *   next  what follows the case's own steps: 0 exit port 0, 1 the honest protocol, 2 spin
 *   replay  32 bytes: the binding the replay case sends (an answer from an earlier boot)
 * The honest protocol (case 0) computes the real liveness binding,
 * SHA-256("truecold-liveness-v1\0" || nonce || boot id), so a correct guest reaches
 * strict-ready: the control that shows the suite's failures are the attacks' doing.
 */
    .set PORT_RECORD,    0x0f12
    .set COM1,           0x3f8
    .set H_CHUNK,        4096
    .set H_CASES,        23

.macro BOOT_ID
    .ascii "0b1e57a1-7e57-4c0d-8bad-f00dcafe0001"
.endm

    .text
    .code64
hostile_main:
    mov rsp, offset stack_top
    /* RAM (sum of the type-1 entries) and its top, from the PVH memory map */
    mov r8d, dword ptr [mm_ptr]
    mov r9d, dword ptr [mm_count]
    xor r10, r10
    xor r11, r11
1:  test r9d, r9d
    jz 3f
    cmp dword ptr [r8 + 16], 1
    jne 2f
    mov rax, qword ptr [r8 + 8]
    add r10, rax
    add rax, qword ptr [r8]
    cmp rax, r11
    jbe 2f
    mov r11, rax
2:  add r8, 24
    dec r9d
    jmp 1b
3:  mov qword ptr [h_ram], r10
    mov qword ptr [h_ram_top], r11
    mov eax, 1
    cpuid
    shr ebx, 16
    and ebx, 0xff
    mov qword ptr [h_ncpus], rbx
    /* a 4 KiB chunk of 'a' for the floods */
    mov rdi, offset h_chunk
    mov ecx, H_CHUNK
    mov al, 'a'
    rep stosb
    mov rax, qword ptr [h_case]
    cmp rax, H_CASES
    jae h_bad_case
    jmp qword ptr [h_table + rax * 8]

h_table:
    .quad h_honest          /*  0 the honest protocol (control) */
    .quad h_spin            /*  1 never rings */
    .quad h_triple          /*  2 triple fault */
    .quad h_exit_early      /*  3 exit port (code arg) before any doorbell */
    .quad h_ports           /*  4 out+in on every port but the truecold block */
    .quad h_mmio            /*  5 MMIO reads+writes below 1 MiB and above RAM */
    .quad h_storm           /*  6 arg doorbells of an unknown phase (0: forever) */
    .quad h_serial          /*  7 arg 4 KiB chunks to COM1 (0: forever) */
    .quad h_noend           /*  8 a record-port line of arg 4 KiB chunks, no end (0: forever) */
    .quad h_giant           /*  9 a reply line of arg 4 KiB chunks, then its end */
    .quad h_malformed       /* 10 the malformed lines below */
    .quad h_reply_early     /* 11 a well-formed reply before the Ready doorbell */
    .quad h_nonce_early     /* 12 the challenge read before Ready, that answer sent after */
    .quad h_const           /* 13 a constant binding */
    .quad h_other_nonce     /* 14 the binding of another nonce */
    .quad h_replay          /* 15 the binding patched in (an earlier boot's answer) */
    .quad h_record_first    /* 16 a success record before the reply */
    .quad h_twice           /* 17 the honest protocol, then a second reply and record */
    .quad h_mem_lie         /* 18 honest, but mem_firmware_ram = RAM + arg (wrapping) */
    .quad h_ready_first     /* 19 Ready without InitStart, then honest */
    .quad h_ready_twice     /* 20 Ready twice */
    .quad h_not_run         /* 21 honest, but the record says workload=not_run */
    .quad h_wide            /* 22 wide accesses to the truecold ports */

h_bad_case:
    mov al, 0xee
    jmp h_exit

/* what follows a case: h_next (0 exit port 0, 1 honest, 2 spin) */
h_then:
    mov rax, qword ptr [h_next]
    cmp rax, 1
    je h_honest
    cmp rax, 2
    je h_spin
h_exit0:
    xor eax, eax
h_exit:                               /* al = code */
    mov dx, PORT_EXIT
    out dx, al
h_spin:
    pause
    jmp h_spin

h_honest:
    mov al, 1
    call h_ring
h_honest_ready:
    mov al, 2
    call h_ring
    call h_read_nonce
    mov rsi, offset h_nonce
    call h_bind_nonce
    call h_reply
    call h_record
    jmp h_exit0

h_triple:
    lidt [h_null_idt]
    ud2

h_exit_early:
    mov al, byte ptr [h_arg]
    jmp h_exit

h_ports:
    xor r12d, r12d
1:  cmp r12d, PORT_DOORBELL
    jb 2f
    cmp r12d, PORT_DOORBELL + 0xf
    jbe 3f
2:  mov edx, r12d
    mov al, 0xa5
    out dx, al
    in al, dx
3:  inc r12d
    cmp r12d, 0x10000
    jb 1b
    jmp h_then

h_mmio:
    /* the ROM area below 1 MiB (a read-only slot: writes exit) */
    mov rsi, 0xa0000
1:  mov al, byte ptr [rsi]
    mov byte ptr [rsi], 0xa5
    add rsi, 0x1000
    cmp rsi, 0x100000
    jb 1b
    /* from the top of RAM to the end of the mapping, every 64 MiB, but not the
       IOAPIC/LAPIC window [0xfe000000, 4 GiB) */
    mov rsi, qword ptr [h_ram_top]
    add rsi, 0x1fffff
    and rsi, -0x200000
    mov r12, MAX_GIB
    shl r12, 30
    mov r13, 0xfe000000
    mov r14, 0x100000000
2:  cmp rsi, r12
    jae 4f
    cmp rsi, r13
    jb 3f
    cmp rsi, r14
    jb 5f
3:  mov eax, dword ptr [rsi]
    mov dword ptr [rsi], 0xa5a5a5a5
5:  add rsi, 0x4000000
    jmp 2b
4:  jmp h_then

h_storm:
    mov r12, qword ptr [h_arg]
    mov dx, PORT_DOORBELL
1:  mov al, 7                          /* no such phase */
    out dx, al
    test r12, r12
    jz 1b
    dec r12
    jnz 1b
    jmp h_then

/* arg chunks of 'a' to port r13w (arg 0: forever) */
h_flood:
    mov r12, qword ptr [h_arg]
1:  mov rsi, offset h_chunk
    mov ecx, H_CHUNK
    mov dx, r13w
    rep outsb
    test r12, r12
    jz 1b
    dec r12
    jnz 1b
    ret

h_serial:
    mov r13d, COM1
    call h_flood
    jmp h_then

h_noend:
    mov al, 1
    call h_ring
    mov rsi, offset s_reply_head
    mov ecx, s_reply_head_end - s_reply_head
    call h_send
    mov r13d, PORT_RECORD
    call h_flood
    jmp h_then

h_giant:
    mov al, 1
    call h_ring
    mov rsi, offset s_reply_head
    mov ecx, s_reply_head_end - s_reply_head
    call h_send
    mov r13d, PORT_RECORD
    call h_flood
    mov rsi, offset s_newline
    mov ecx, 1
    call h_send
    jmp h_then

h_malformed:
    mov al, 1
    call h_ring
    mov rsi, offset s_bad
    mov ecx, s_bad_end - s_bad
    call h_send
    jmp h_then

h_reply_early:
    mov al, 1
    call h_ring
    mov rsi, offset h_zero16
    call h_bind_nonce
    call h_reply
    jmp h_then

h_nonce_early:
    mov al, 1
    call h_ring
    call h_read_nonce                  /* before Ready: the VMM has no nonce yet */
    mov al, 2
    call h_ring
    mov rsi, offset h_nonce
    call h_bind_nonce
    call h_reply
    call h_record
    jmp h_then

/* InitStart, Ready, the nonce read */
h_to_nonce:
    mov al, 1
    call h_ring
    mov al, 2
    call h_ring
    jmp h_read_nonce

h_const:
    call h_to_nonce
    mov rdi, offset h_bind
    mov ecx, 32
    mov al, 0x41
    rep stosb
    call h_reply
    call h_record
    jmp h_then

h_other_nonce:
    call h_to_nonce
    xor byte ptr [h_nonce], 1
    mov rsi, offset h_nonce
    call h_bind_nonce
    call h_reply
    call h_record
    jmp h_then

h_replay:
    call h_to_nonce
    mov rsi, offset h_replay_bind
    mov rdi, offset h_bind
    mov ecx, 32
    rep movsb
    call h_reply
    call h_record
    jmp h_then

h_record_first:
    call h_to_nonce
    call h_record
    mov rsi, offset h_nonce
    call h_bind_nonce
    call h_reply
    jmp h_then

h_twice:
    call h_to_nonce
    mov rsi, offset h_nonce
    call h_bind_nonce
    call h_reply
    call h_record
    call h_reply
    call h_record
    jmp h_then

h_mem_lie:
    mov rax, qword ptr [h_arg]
    mov qword ptr [h_mem_delta], rax
    jmp h_honest

h_ready_first:
    jmp h_honest_ready

h_ready_twice:
    mov al, 1
    call h_ring
    mov al, 2
    call h_ring
    jmp h_honest_ready

h_not_run:
    mov qword ptr [h_workload], offset s_not_run
    jmp h_honest

h_wide:
    mov dx, PORT_DOORBELL
    mov ax, 0x0201
    out dx, ax                         /* a doorbell of 2 bytes */
    mov dx, PORT_CHALLENGE
    mov eax, 0x01020304
    out dx, eax                        /* a write to the challenge port */
    in eax, dx                         /* a read of it before Ready */
    mov dx, PORT_RECORD
    in eax, dx
    mov dx, PORT_DOORBELL
    in ax, dx
    jmp h_then

/* ---- helpers (clobber everything but rsp) ---- */

h_ring:                               /* al = phase */
    mov dx, PORT_DOORBELL
    out dx, al
    ret

h_read_nonce:
    mov rdi, offset h_nonce
    mov ecx, 16
    mov dx, PORT_CHALLENGE
    rep insb
    ret

h_send:                               /* rsi, ecx bytes to the record port */
    mov dx, PORT_RECORD
    rep outsb
    ret

h_puts:                               /* NUL-terminated rsi appended at rdi */
    lodsb
    test al, al
    jz 1f
    stosb
    jmp h_puts
1:  ret

h_putdec:                             /* rax in decimal appended at rdi */
    mov rsi, offset h_dec + 24
    mov r8d, 10
    xor ecx, ecx
1:  xor edx, edx
    div r8
    add dl, '0'
    dec rsi
    mov byte ptr [rsi], dl
    inc ecx
    test rax, rax
    jnz 1b
    rep movsb
    ret

h_puthex:                             /* ecx bytes at rsi in hex appended at rdi */
    test ecx, ecx
    jz 1f
    movzx eax, byte ptr [rsi]
    mov edx, eax
    shr eax, 4
    and edx, 15
    mov al, byte ptr [h_hexd + rax]
    stosb
    mov al, byte ptr [h_hexd + rdx]
    stosb
    inc rsi
    dec ecx
    jmp h_puthex
1:  ret

/* sends the line h_line .. rdi */
h_send_line:
    mov rcx, rdi
    mov rsi, offset h_line
    sub rcx, rsi
    jmp h_send

/* "TC1 reply boot_id=… binding=<h_bind>\n" */
h_reply:
    mov rdi, offset h_line
    mov rsi, offset s_reply
    call h_puts
    mov rsi, offset h_bind
    mov ecx, 32
    call h_puthex
    mov al, 10
    stosb
    jmp h_send_line

/* the record of a guest that passed everything (its RAM the memory map's + h_mem_delta) */
h_record:
    mov rdi, offset h_line
    mov rsi, offset s_rec1
    call h_puts
    mov rax, qword ptr [h_ram]
    call h_putdec
    mov rsi, offset s_rec2
    call h_puts
    mov rax, qword ptr [h_ram]
    add rax, qword ptr [h_mem_delta]
    call h_putdec
    mov rsi, offset s_rec3
    call h_puts
    mov rax, qword ptr [h_ram]
    call h_putdec
    mov rsi, offset s_rec4
    call h_puts
    mov rax, qword ptr [h_ncpus]
    call h_putdec
    mov rsi, offset s_rec5
    call h_puts
    mov rax, qword ptr [h_ncpus]
    call h_putdec
    mov rsi, offset s_rec6
    call h_puts
    mov rsi, qword ptr [h_workload]
    call h_puts
    mov rsi, offset s_rec7
    call h_puts
    jmp h_send_line

/* h_bind = SHA-256("truecold-liveness-v1\0" || 16 bytes at rsi || BOOT_ID): 73 bytes,
   two blocks once padded */
h_bind_nonce:
    mov rdx, rsi
    mov rdi, offset h_msg
    xor eax, eax
    mov ecx, 128
    rep stosb
    mov rsi, offset s_domain
    mov rdi, offset h_msg
    mov ecx, 21
    rep movsb
    mov rsi, rdx
    mov ecx, 16
    rep movsb
    mov rsi, offset s_boot_id
    mov ecx, 36
    rep movsb
    mov byte ptr [h_msg + 73], 0x80
    mov byte ptr [h_msg + 126], 0x02   /* 584 bits, big endian */
    mov byte ptr [h_msg + 127], 0x48
    mov rsi, offset sha_iv
    mov rdi, offset h_sha_h
    mov ecx, 32
    rep movsb
    mov rsi, offset h_msg
    call sha_block
    mov rsi, offset h_msg + 64
    call sha_block
    xor ecx, ecx
1:  mov eax, dword ptr [h_sha_h + rcx * 4]
    bswap eax
    mov dword ptr [h_bind + rcx * 4], eax
    inc ecx
    cmp ecx, 8
    jb 1b
    ret

/* one SHA-256 compression of the 64 bytes at rsi into h_sha_h (FIPS 180-4, 6.2.2) */
sha_block:
    xor ecx, ecx
1:  mov eax, dword ptr [rsi + rcx * 4]
    bswap eax
    mov dword ptr [h_sha_w + rcx * 4], eax
    inc ecx
    cmp ecx, 16
    jb 1b
2:  mov eax, dword ptr [h_sha_w + rcx * 4 - 60]    /* w[i-15] */
    mov ebx, eax
    mov edx, eax
    ror eax, 7
    ror ebx, 18
    shr edx, 3
    xor eax, ebx
    xor eax, edx                                   /* s0 */
    mov ebx, dword ptr [h_sha_w + rcx * 4 - 8]     /* w[i-2] */
    mov edx, ebx
    mov edi, ebx
    ror ebx, 17
    ror edx, 19
    shr edi, 10
    xor ebx, edx
    xor ebx, edi                                   /* s1 */
    add eax, ebx
    add eax, dword ptr [h_sha_w + rcx * 4 - 64]    /* w[i-16] */
    add eax, dword ptr [h_sha_w + rcx * 4 - 28]    /* w[i-7] */
    mov dword ptr [h_sha_w + rcx * 4], eax
    inc ecx
    cmp ecx, 64
    jb 2b
    mov r8d, dword ptr [h_sha_h]
    mov r9d, dword ptr [h_sha_h + 4]
    mov r10d, dword ptr [h_sha_h + 8]
    mov r11d, dword ptr [h_sha_h + 12]
    mov r12d, dword ptr [h_sha_h + 16]
    mov r13d, dword ptr [h_sha_h + 20]
    mov r14d, dword ptr [h_sha_h + 24]
    mov r15d, dword ptr [h_sha_h + 28]
    xor ecx, ecx
3:  mov eax, r12d                                  /* a..h = r8d..r15d */
    mov ebx, r12d
    mov edx, r12d
    ror eax, 6
    ror ebx, 11
    ror edx, 25
    xor eax, ebx
    xor eax, edx                                   /* S1(e) */
    mov ebx, r12d
    and ebx, r13d
    mov edx, r12d
    not edx
    and edx, r14d
    xor ebx, edx                                   /* ch(e, f, g) */
    add eax, ebx
    add eax, r15d
    add eax, dword ptr [sha_k + rcx * 4]
    add eax, dword ptr [h_sha_w + rcx * 4]         /* t1 */
    mov ebx, r8d
    mov edx, r8d
    mov edi, r8d
    ror ebx, 2
    ror edx, 13
    ror edi, 22
    xor ebx, edx
    xor ebx, edi                                   /* S0(a) */
    mov edx, r8d
    and edx, r9d
    mov edi, r8d
    and edi, r10d
    xor edx, edi
    mov edi, r9d
    and edi, r10d
    xor edx, edi                                   /* maj(a, b, c) */
    add ebx, edx                                   /* t2 */
    mov r15d, r14d
    mov r14d, r13d
    mov r13d, r12d
    mov r12d, r11d
    add r12d, eax
    mov r11d, r10d
    mov r10d, r9d
    mov r9d, r8d
    lea r8d, [rax + rbx]
    inc ecx
    cmp ecx, 64
    jb 3b
    add dword ptr [h_sha_h], r8d
    add dword ptr [h_sha_h + 4], r9d
    add dword ptr [h_sha_h + 8], r10d
    add dword ptr [h_sha_h + 12], r11d
    add dword ptr [h_sha_h + 16], r12d
    add dword ptr [h_sha_h + 20], r13d
    add dword ptr [h_sha_h + 24], r14d
    add dword ptr [h_sha_h + 28], r15d
    ret

    .data
    .p2align 3
/* the control block the test patches (see the top of this file) */
hostile_ctl:
    .ascii "TCHOSTL1"
h_case:         .quad 0
h_arg:          .quad 0
h_next:         .quad 0
h_replay_bind:  .fill 32, 1, 0

h_mem_delta:    .quad 0
h_workload:     .quad s_bench_ok
h_null_idt:     .word 0
                .quad 0
h_zero16:       .fill 16, 1, 0

sha_iv:
    .long 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a
    .long 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19
sha_k:
    .long 0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5
    .long 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5
    .long 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3
    .long 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174
    .long 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc
    .long 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da
    .long 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7
    .long 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967
    .long 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13
    .long 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85
    .long 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3
    .long 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070
    .long 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5
    .long 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3
    .long 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208
    .long 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2

h_hexd:         .ascii "0123456789abcdef"
s_domain:       .ascii "truecold-liveness-v1"
                .byte 0
s_boot_id:      BOOT_ID
s_reply:        .ascii "TC1 reply boot_id="
                BOOT_ID
                .asciz " binding="
s_reply_head:   .ascii "TC1 reply boot_id="
s_reply_head_end:
s_newline:      .ascii "\n"
s_rec1:         .ascii "TC1 record boot_id="
                BOOT_ID
                .asciz " t_init_ns=1 t_ready_ns=2 t_reply_ns=3 t_record_ns=4 mem_configured="
s_rec2:         .asciz " mem_firmware_ram="
s_rec3:         .asciz " mem_total="
s_rec4:         .asciz " mem_present=0 mem_managed=0 mem_probe=4194304 cpus="
s_rec5:         .asciz " packages=1 cores_per_package="
s_rec6:         .asciz " threads_per_core=1 tsc_deadline_timer=0 constant_tsc=0 nonstop_tsc=0 tsc_unstable=0 clocksource=none workload="
s_rec7:         .asciz " code=ok\n"
s_bench_ok:     .asciz "BENCH_OK"
s_not_run:      .asciz "not_run"

/* malformed lines, in the order vmm/tests/hostile.rs expects their errors (the first
   is well-formed: a trace sync line the second repeats) */
s_bad:
    .ascii "TC1 ksync kmsg_us=1 mono_ns=2 records=3 truncated=0\n"
    .ascii "TC1 ksync kmsg_us=1 mono_ns=2 records=3 truncated=0\n"
    .ascii "garbage\n"
    .ascii "\n"
    .ascii "TC1\n"
    .ascii "TC1 bogus a=1\n"
    .ascii "TC1 reply boot_id\n"
    .ascii "TC1 reply nonsense=1\n"
    .ascii "TC1 reply boot_id=a boot_id=b\n"
    .ascii "TC1 reply boot_id="
    BOOT_ID
    .ascii "\n"
    .ascii "TC1 reply boot_id=NOT-A-UUID binding=00\n"
    .ascii "TC1 reply boot_id="
    BOOT_ID
    .ascii " binding="
    .fill 64, 1, 'z'
    .ascii "\n"
    .ascii "TC1 "
    .byte 0xff, 0xfe                   /* invalid UTF-8 */
    .ascii " reply\n"
    .ascii "TC1 reply "
    .byte 0xc3, 0x28                   /* invalid UTF-8: a lead byte without its tail */
    .ascii "\n"
    .ascii "TC1 record a"
    .byte 0
    .ascii "b\n"
    .ascii "TC1 reply\tboot_id=x\n"
    .ascii "TC1 ready boot_id="
    BOOT_ID
    .ascii "\n"
    .ascii "TC1 nonce value="
    .fill 32, 1, '0'
    .ascii "\n"
    .ascii "TC1 kmark name=bogus t_us=1\n"
    .ascii "TC1 initcall fn=x start_us=1 dur_us=99999999999999999999999 ret=0\n"
    .ascii "TC1 record boot_id=none\n"
    .ascii "TC1  reply\n"
    .ascii "TC1 reply boot_id="
    BOOT_ID
    .ascii " binding="
    .fill 64, 1, '0'
    .ascii "\n"
s_bad_end:

    .bss
    .p2align 4
h_ram:          .skip 8
h_ram_top:      .skip 8
h_ncpus:        .skip 8
h_nonce:        .skip 16
h_bind:         .skip 32
h_dec:          .skip 24
h_msg:          .skip 128
h_sha_h:        .skip 32
h_sha_w:        .skip 256
h_line:         .skip 1024
h_chunk:        .skip H_CHUNK
    .text
