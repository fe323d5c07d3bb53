/*
 * virtio_net.c - net=echo: a virtio-net driver (virtio 1.2, 5.1) that
 * answers ARP for its address, ICMP echo requests and UDP port 7 (echo,
 * RFC 862), and drops everything else.
 *
 * Every reply is the request rewritten in place: the received buffer goes
 * from the receive queue to the transmit queue and, once sent, back to the
 * receive queue. Nothing is copied, and no checksum is computed: swapping
 * the source and destination addresses and ports leaves the IPv4 and UDP
 * checksums as they were, and the ICMP type change is folded into the old
 * checksum (RFC 1624). A request with a bad checksum therefore gets a reply
 * with a bad checksum, which its sender drops.
 *
 * NET_QSIZE buffers of NET_BUF_SIZE bytes (layout.h) are all there is, so
 * neither queue can overflow. Every frame the device hands back is checked
 * against the buffer it came in and against its own headers before a byte
 * is rewritten: short, oversized, fragmented, mis-sized or unknown frames
 * are counted and the buffer goes straight back to the receive queue.
 *
 * The device's interrupt (the IRQ of its virtio_mmio.device= word, through
 * I/O APIC pin IRQ, edge-triggered) only wakes the CPU and counts; the idle
 * loop in kernel.c calls net_poll() whenever net_pending() says there is
 * something to do. Without an IRQ (a window found by probing), the tick's
 * wakeup does the same, so replies then wait for the next tick.
 */
#include "virtio.h"

/* The features this driver accepts: only MAC (5.1.3). VERSION_1 is
 * virtio.c's; without MRG_RXBUF, offloads and the rest, every frame is
 * whole, at most MTU-sized, and the header says nothing. */
#define VIRTIO_NET_F_MAC    (1u << 5)
#define NET_HDR             12      /* struct virtio_net_hdr_v1 */

#define ETH_HDR             14
#define ETH_ARP             0x0806
#define ETH_IPV4            0x0800
#define ARP_LEN             28      /* Ethernet/IPv4 ARP body */
#define IP_PROTO_ICMP       1
#define IP_PROTO_UDP        17
#define ICMP_ECHO_REQUEST   8
#define UDP_ECHO_PORT       7

/* Driver state. Initialised in full: guest.ld rejects .bss. */
static struct {
    uintptr_t regs;
    uint32_t irq;               /* VIRTIO_NO_IRQ: polled from the tick */
    uint8_t mac[6];
    uint8_t ip[4];
    uint16_t rx_avail, tx_avail;   /* the avail idx we publish next */
    uint16_t rx_used, tx_used;     /* the used idx we have consumed */
    uint64_t irqs_handled;         /* net_irqs the last poll accounted for */
} net = {0, VIRTIO_NO_IRQ, {0}, {10, 0, 2, 15}, 0, 0, 0, 0, 0};

/* The counts `net: ...` prints. */
static struct {
    uint64_t rx, arp, icmp, udp, dropped, bad;
} cnt = {0, 0, 0, 0, 0, 0};

/* ------------------------------------------------------------- helpers --- */

/* Frames sit 12 bytes into a buffer, so their fields are unaligned: x86 does
 * not mind, and __builtin_memcpy is one mov. */
static inline uint32_t ld32(const uint8_t *p)
{
    uint32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}

static inline uint16_t ld16(const uint8_t *p)
{
    uint16_t v;
    __builtin_memcpy(&v, p, 2);
    return v;
}

static inline void st32(uint8_t *p, uint32_t v)
{
    __builtin_memcpy(p, &v, 4);
}

static inline void st16(uint8_t *p, uint16_t v)
{
    __builtin_memcpy(p, &v, 2);
}

static inline uint16_t be16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

/* Swaps n (a multiple of 2) bytes at a with those at b, in 16-bit steps. */
static void swap_bytes(uint8_t *a, uint8_t *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i += 2) {
        uint16_t t = ld16(a + i);
        st16(a + i, ld16(b + i));
        st16(b + i, t);
    }
}

static inline int mac_is(const uint8_t *p, const uint8_t *mac)
{
    return ld32(p) == ld32(mac) && ld16(p + 4) == ld16(mac + 4);
}

static inline uintptr_t buf_addr(uint32_t b)
{
    return NET_BUF_BASE + (uintptr_t)b * NET_BUF_SIZE;
}

/* ------------------------------------------------------------ replying --- */

/* Turns an Ethernet frame to us into the reply to its sender: the sender's
 * address becomes the destination, ours the source. */
static void eth_reply(uint8_t *f)
{
    __builtin_memcpy(f, f + 6, 6);
    __builtin_memcpy(f + 6, net.mac, 6);
}

/* An ARP request for our address (RFC 826), answered in place. Returns the
 * reply's length, or 0. */
static uint32_t arp(uint8_t *f, uint32_t len)
{
    uint8_t *a = f + ETH_HDR;
    if (len < ETH_HDR + ARP_LEN)
        return 0;
    /* htype 1 (Ethernet), ptype IPv4, hlen 6, plen 4, op 1 (request). */
    if (ld32(a) != 0x00080100u || ld16(a + 4) != 0x0406 || ld16(a + 6) != 0x0100)
        return 0;
    if (ld32(a + 24) != ld32(net.ip) || (a[8] & 1))
        return 0;
    a[7] = 2;                                  /* op: reply */
    __builtin_memcpy(a + 18, a + 8, 10);       /* target = the asker's MAC and IP */
    __builtin_memcpy(a + 8, net.mac, 6);       /* sender = us */
    st32(a + 14, ld32(net.ip));
    eth_reply(f);
    cnt.arp++;
    return ETH_HDR + ARP_LEN;
}

/* An IPv4 datagram to us: ICMP echo request or UDP to port 7, answered in
 * place. Returns the reply's length (the datagram's, without any Ethernet
 * padding), or 0. */
static uint32_t ipv4(uint8_t *f, uint32_t len)
{
    uint8_t *ip = f + ETH_HDR;
    if (len < ETH_HDR + 20 || (ip[0] >> 4) != 4)
        return 0;
    uint32_t ihl = (uint32_t)(ip[0] & 15) * 4;
    uint32_t total = be16(ip + 2);
    /* The header and the datagram must fit what arrived; fragments are not
     * reassembled (MF or an offset: dropped). */
    if (ihl < 20 || total < ihl + 8 || total > len - ETH_HDR || (be16(ip + 6) & 0x3fff))
        return 0;
    /* To us; never to a sender that is broadcast, multicast or unset. */
    if (ld32(ip + 16) != ld32(net.ip) || ip[12] >= 224 || ip[12] == 0 || (f[6] & 1))
        return 0;
    uint8_t *l4 = ip + ihl;
    if (ip[9] == IP_PROTO_ICMP) {
        if (l4[0] != ICMP_ECHO_REQUEST || l4[1] != 0)
            return 0;
        /* Type 8 -> 0: the 16-bit word 0x0800 leaves the sum, so the checksum
         * (its complement) grows by 0x0800, with an end-around carry
         * (RFC 1624, eqn. 3; byte order does not matter to it). */
        l4[0] = 0;
        uint32_t c = (uint32_t)ld16(l4 + 2) + 0x0008;
        st16(l4 + 2, (uint16_t)(c + (c >> 16)));
        cnt.icmp++;
    } else if (ip[9] == IP_PROTO_UDP) {
        /* Not from port 7 either: two echo services would echo forever. */
        if (be16(l4 + 2) != UDP_ECHO_PORT || be16(l4) == UDP_ECHO_PORT)
            return 0;
        swap_bytes(l4, l4 + 2, 2);
        cnt.udp++;
    } else {
        return 0;
    }
    swap_bytes(ip + 12, ip + 16, 4);
    eth_reply(f);
    return ETH_HDR + total;
}

/* What buffer b, holding `used` bytes (header + frame), answers with: the
 * frame length of the reply now in it, or 0 to drop it. */
static uint32_t answer(uint32_t b, uint32_t used)
{
    uint8_t *f = (uint8_t *)(buf_addr(b) + NET_HDR);
    if (used < NET_HDR + ETH_HDR || used > NET_BUF_SIZE) {
        cnt.bad++;
        return 0;
    }
    uint32_t len = used - NET_HDR;
    uint16_t type = be16(f + 12);
    uint32_t reply = 0;
    if (type == ETH_ARP && (mac_is(f, net.mac) || ld32(f) == 0xffffffffu))
        reply = arp(f, len);
    else if (type == ETH_IPV4 && mac_is(f, net.mac))
        reply = ipv4(f, len);
    if (!reply)
        cnt.dropped++;
    return reply;
}

/* --------------------------------------------------------------- rings --- */

static inline volatile uint16_t *avail_ring(uintptr_t q)
{
    return (volatile uint16_t *)(q + VQ_AVAIL_OFF);
}

static inline volatile uint16_t *used_ring(uintptr_t q)
{
    return (volatile uint16_t *)(q + VQ_USED_OFF);
}

/* Entry i (mod the ring's size) of a used ring: {id, len}. */
static inline const volatile uint32_t *used_elem(uintptr_t q, uint16_t i)
{
    return (const volatile uint32_t *)(q + VQ_USED_OFF + 4) + (i % NET_QSIZE) * 2;
}

/* Buffer b (whose receive descriptor is b) back on the receive queue. */
static void post_rx(uint32_t b)
{
    volatile uint16_t *avail = avail_ring(VQ_NET_RX_BASE);
    avail[2 + net.rx_avail % NET_QSIZE] = (uint16_t)b;
    net.rx_avail++;
}

/* Buffer b, holding a reply of `len` frame bytes, on the transmit queue, in
 * the descriptor of the slot it takes. The header goes out zeroed (no
 * offload asked for; num_buffers is 0 on transmit, 5.1.6.2). */
static void post_tx(uint32_t b, uint32_t len)
{
    uint32_t slot = net.tx_avail % NET_QSIZE;
    struct vdesc *d = (struct vdesc *)VQ_NET_TX_BASE + slot;
    uint8_t *hdr = (uint8_t *)buf_addr(b);
    st32(hdr, 0);
    st32(hdr + 4, 0);
    st32(hdr + 8, 0);
    d->addr = buf_addr(b);
    d->len = NET_HDR + len;
    d->flags = 0;
    d->next = 0;
    avail_ring(VQ_NET_TX_BASE)[2 + slot] = (uint16_t)slot;
    net.tx_avail++;
}

/* Publishes the new avail idx of queue q and notifies the device unless it
 * said it does not need to know (VRING_USED_F_NO_NOTIFY). */
static void publish(uintptr_t base, uint32_t q, uint16_t idx)
{
    barrier();
    avail_ring(base)[1] = idx;
    __asm__ volatile("mfence" ::: "memory");   /* the idx before the flags read */
    if (!(used_ring(base)[0] & VRING_USED_F_NO_NOTIFY))
        vwrite(net.regs, VR_QUEUE_NOTIFY, q);
}

/* --------------------------------------------------------------- polls --- */

/* With an interrupt, only a new one means work: every used entry the device
 * adds after net_poll's acknowledgement raises one (sent replies raise none
 * while half the buffers are receiving, and wait for the next frame's).
 * Polled from the tick, the used indexes themselves. */
int net_pending(void)
{
    if (net.irq != VIRTIO_NO_IRQ)
        return net_irqs != net.irqs_handled;
    return net.regs && (used_ring(VQ_NET_RX_BASE)[1] != net.rx_used ||
                        used_ring(VQ_NET_TX_BASE)[1] != net.tx_used);
}

void net_poll(void)
{
    if (!net.regs)
        return;
    uint16_t rx_before = net.rx_avail, tx_before = net.tx_avail;
    /* Acknowledge first: an interrupt for anything used after this read
     * raises the line (and net_irqs) again. */
    if (net.irq != VIRTIO_NO_IRQ) {
        net.irqs_handled = net_irqs;
        uint32_t isr = vread(net.regs, VR_INTERRUPT_STATUS);
        if (isr)
            vwrite(net.regs, VR_INTERRUPT_ACK, isr);
    }
    /* Sent replies: their buffers go back to receiving. */
    uint16_t end = used_ring(VQ_NET_TX_BASE)[1];
    barrier();
    for (; net.tx_used != end; net.tx_used++) {
        uint32_t id = used_elem(VQ_NET_TX_BASE, net.tx_used)[0];
        uint64_t b = id < NET_QSIZE
                         ? (((struct vdesc *)VQ_NET_TX_BASE)[id].addr - NET_BUF_BASE) / NET_BUF_SIZE
                         : NET_QSIZE;
        if (b >= NET_QSIZE) {
            cnt.bad++;
            continue;
        }
        post_rx((uint32_t)b);
    }
    /* Received frames: a reply goes out in the same buffer, anything else
     * goes back to receiving. A reply that would overrun the transmit ring
     * (only a device handing back a buffer twice could cause it) is dropped. */
    end = used_ring(VQ_NET_RX_BASE)[1];
    barrier();
    for (; net.rx_used != end; net.rx_used++) {
        const volatile uint32_t *e = used_elem(VQ_NET_RX_BASE, net.rx_used);
        uint32_t id = e[0];
        if (id >= NET_QSIZE) {
            cnt.bad++;
            continue;
        }
        cnt.rx++;
        uint32_t len = answer(id, e[1]);
        if (len && (uint16_t)(net.tx_avail - net.tx_used) < NET_QSIZE)
            post_tx(id, len);
        else
            post_rx(id);
    }
    /* A sent reply needs no interrupt while the receive queue holds at least
     * half the buffers: its buffer comes back with the next frame's poll.
     * Below that, a burst could leave every buffer sent and none to receive
     * into, and no frame would come to wake us: then ask for it. Halves the
     * interrupts of an echo. */
    avail_ring(VQ_NET_TX_BASE)[0] =
        (uint16_t)(net.rx_avail - net.rx_used) >= NET_QSIZE / 2 ? VRING_AVAIL_F_NO_INTERRUPT : 0;
    if (net.tx_avail != tx_before)
        publish(VQ_NET_TX_BASE, 1, net.tx_avail);
    if (net.rx_avail != rx_before)
        publish(VQ_NET_RX_BASE, 0, net.rx_avail);
}

/* ------------------------------------------------------------- set-up --- */

static void put_mac_ip(void)
{
    puts("net: mac=");
    for (uint32_t i = 0; i < 6; i++) {
        const char *hex = "0123456789abcdef";
        char s[4] = {hex[net.mac[i] >> 4], hex[net.mac[i] & 15], i < 5 ? ':' : 0, 0};
        puts(s);
    }
    puts(" ip=");
    for (uint32_t i = 0; i < 4; i++) {
        put_dec(net.ip[i]);
        if (i < 3)
            puts(".");
    }
}

/* I/O APIC pin `pin`: edge, active high, fixed delivery of `vector` to APIC
 * id 0 (82093AA data sheet, "I/O Redirection Table Registers"). Returns 0 if
 * the I/O APIC has no such pin (its version register: the highest entry in
 * bits 23:16). */
static int ioapic_route(uint32_t pin, uint32_t vector)
{
    volatile uint32_t *regsel = (volatile uint32_t *)(uintptr_t)(IOAPIC_BASE + IOAPIC_REGSEL);
    volatile uint32_t *window = (volatile uint32_t *)(uintptr_t)(IOAPIC_BASE + IOAPIC_WINDOW);
    *regsel = 1;
    if (pin > ((*window >> 16) & 0xff))
        return 0;
    *regsel = 0x11 + 2 * pin;
    *window = 0;
    *regsel = 0x10 + 2 * pin;
    *window = vector;
    return 1;
}

void net_start(const uint8_t ip[4])
{
    uintptr_t r = virtio_find(1);
    int64_t features;
    if (!r || (features = virtio_negotiate(r, VIRTIO_NET_F_MAC)) < 0 ||
        !virtio_queue(r, 0, VQ_NET_RX_BASE, NET_QSIZE) ||
        !virtio_queue(r, 1, VQ_NET_TX_BASE, NET_QSIZE))
        virtio_missing("net=echo", "virtio-net");
    net.regs = r;
    __builtin_memcpy(net.ip, ip, 4);
    /* QEMU's default MAC where the device has none to give. */
    static const uint8_t fallback[6] = {0x52, 0x54, 0x00, 0x12, 0x34, 0x56};
    for (uint32_t i = 0; i < 6; i++)
        net.mac[i] = (features & VIRTIO_NET_F_MAC) ? *(volatile uint8_t *)(r + VR_CONFIG + i)
                                                   : fallback[i];
    /* Every buffer on the receive queue, each in the descriptor of its
     * number; transmit descriptors are filled as replies go out. */
    struct vdesc *d = (struct vdesc *)VQ_NET_RX_BASE;
    for (uint32_t b = 0; b < NET_QSIZE; b++) {
        d[b].addr = buf_addr(b);
        d[b].len = NET_BUF_SIZE;
        d[b].flags = VDESC_WRITE;
        d[b].next = 0;
        post_rx(b);
    }
    net.irq = virtio_irq(r);
    if (net.irq != VIRTIO_NO_IRQ) {
        lapic_write(LAPIC_SVR, 0x100 | VEC_LAPIC_SPURIOUS);   /* software enable */
        if (!ioapic_route(net.irq, VEC_NET))
            net.irq = VIRTIO_NO_IRQ;
    }
    if (!virtio_driver_ok(r))
        virtio_missing("net=echo", "working virtio-net");
    publish(VQ_NET_RX_BASE, 0, net.rx_avail);
    put_mac_ip();
    if (net.irq != VIRTIO_NO_IRQ) {
        puts(" irq=");
        put_dec(net.irq);
    } else {
        puts(" irq=none (polled each tick)");
    }
    puts("\n");
}

void net_report(void)
{
    if (!net.regs)
        return;
    put_mac_ip();
    puts(" rx=");
    put_dec(cnt.rx);
    puts(" arp=");
    put_dec(cnt.arp);
    puts(" icmp=");
    put_dec(cnt.icmp);
    puts(" udp=");
    put_dec(cnt.udp);
    puts(" dropped=");
    put_dec(cnt.dropped);
    puts(" bad=");
    put_dec(cnt.bad);
    puts(" irqs=");
    put_dec(net_irqs);
    puts("\n");
}
