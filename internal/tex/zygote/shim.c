/*
 * The zygote shim of outprint's TeX pool (see internal/tex/zygote.go).
 *
 * Preloaded into XeTeX (LD_PRELOAD), it does nothing unless the environment
 * names a control socket (OUTPRINT_ZYGOTE_FD) and a gate file
 * (OUTPRINT_ZYGOTE_GATE). Then the first fopen of the gate file, which the
 * zygote's main.tex reaches after loading the preamble, the fonts and
 * \begin{document}, never returns in the zygote: the zygote says "R" on the
 * control socket and serves fork requests until the socket closes.
 *
 * A request is one SOCK_SEQPACKET message: the child's CPU-time limit and
 * flags (uint64s, native byte order), then its folder's path
 * (NUL-terminated), and
 * by SCM_RIGHTS four fds: the folder, the output pipe (stdout and stderr),
 * the driver pipe (fd 3, xdvipdfmx's stdin) and the go pipe's read end. The
 * zygote answers with the child's pid (int32) once the child has detached
 * itself (or died), or minus an errno.
 *
 * Children are forked ahead of their documents, as warm processes are
 * warmed ahead of theirs: a detached child waits for one byte on the go
 * pipe, which the server writes when the document is in the child's folder
 * (end of file instead: the server discards the child, which exits).
 *
 * The child is made with a raw clone(CLONE_PARENT), so it is the server's
 * child, not the zygote's: the server waits for it, reads its rusage and
 * sets its rlimits as for any process it starts. In the child, this file
 * detaches it from the zygote (death signal, process group, CPU limit,
 * fds, folder, environment), waits for its go and then opens the gate file
 * for real: its folder's go.tex, written by the server, which sets the
 * clock and the nonce and lets the document in.
 *
 * Reads of the zygote's memory are copy-on-write; what the zygote shares
 * with a child beyond memory is only its open files, so each is handled:
 * a file open for reading gets a description of its own (a shared one would
 * move the zygote's offset); a file open for writing must be in the
 * zygote's folder and is copied into the child's, at the same offset.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int ctl_fd = -1;
static char *gate;
/* in_child: this process is a zygote's child; fonts_in_memory: its font
 * files are read from memory (a driver zygote's children). */
static int in_child, fonts_in_memory;
/* hot_path: the file of the pages a child writes (see hot_record). */
static char hot_path[PATH_MAX];

__attribute__((constructor)) static void shim_init(void) {
    const char *fd = getenv("OUTPRINT_ZYGOTE_FD");
    const char *g = getenv("OUTPRINT_ZYGOTE_GATE");
    if (fd == NULL || g == NULL)
        return;
    ctl_fd = atoi(fd);
    gate = strdup(g);
    fonts_in_memory = getenv("OUTPRINT_ZYGOTE_FONTS") != NULL;
    /* The hot-page list of this zygote's children, in its folder. */
    if (getcwd(hot_path, sizeof hot_path - 16) != NULL)
        strcat(hot_path, strcmp(g, "main.xdv") == 0 ? "/hot-driver" : "/hot-tex");
    else
        hot_path[0] = 0;
    /* Nothing TeX starts (the output driver's shell) loads the shim. */
    unsetenv("LD_PRELOAD");
    unsetenv("OUTPRINT_ZYGOTE_FD");
    unsetenv("OUTPRINT_ZYGOTE_GATE");
    unsetenv("OUTPRINT_ZYGOTE_FONTS");
}

static void die(const char *what) {
    char msg[256];
    int n = snprintf(msg, sizeof msg, "outprint zygote child: %s: %s\n", what, strerror(errno));
    if (n > 0)
        (void)!write(2, msg, (size_t)n);
    _exit(125);
}

/* copy_to copies the first size bytes of fd into nfd. */
static int copy_to(int fd, int nfd, off_t size) {
    char buf[65536];
    off_t at = 0;
    while (at < size) {
        size_t want = sizeof buf;
        if ((off_t)want > size - at)
            want = (size_t)(size - at);
        ssize_t n = pread(fd, buf, want, at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        for (ssize_t w = 0; w < n;) {
            ssize_t m = write(nfd, buf + w, (size_t)(n - w));
            if (m < 0 && errno == EINTR)
                continue;
            if (m <= 0)
                return -1;
            w += m;
        }
        at += n;
    }
    return 0;
}

/* detach_files gives the child files of its own, as the header says. zdir
 * is the zygote's folder; dirfd the child's. Every fd above 3 that is not a
 * regular file is closed. */
static void detach_files(const char *zdir, int cdir, int keep1, int keep2) {
    int fds[1024], n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        die("open /proc/self/fd");
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < 1024) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        int fd = atoi(e->d_name);
        if (fd <= 3 || fd == cdir || fd == keep1 || fd == keep2 || fd == dirfd(d))
            continue;
        fds[n++] = fd;
    }
    closedir(d);
    size_t zlen = strlen(zdir);
    for (int i = 0; i < n; i++) {
        int fd = fds[i];
        struct stat st;
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            close(fd);
            continue;
        }
        int fl = fcntl(fd, F_GETFL), fdfl = fcntl(fd, F_GETFD);
        if (fl < 0 || fdfl < 0)
            die("fcntl");
        off_t off = lseek(fd, 0, SEEK_CUR);
        char proc[64], path[PATH_MAX];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        int nfd;
        if ((fl & O_ACCMODE) == O_RDONLY) {
            nfd = open(proc, O_RDONLY | O_CLOEXEC);
            if (nfd < 0)
                die("reopen a file");
        } else {
            ssize_t len = readlink(proc, path, sizeof path - 1);
            if (len < 0)
                die("readlink");
            path[len] = 0;
            /* A file the zygote wrote that is gone from its folder (the
             * folder of a retired zygote, removed): the child would
             * write a file named "x (deleted)" and miss x later. The
             * server never removes the folder while a child detaches
             * (see serve); this makes any other way a clear error. */
            static const char deleted[] = " (deleted)";
            size_t dl = sizeof deleted - 1;
            if ((size_t)len > dl && strcmp(path + len - dl, deleted) == 0) {
                errno = ENOENT;
                die("a file the zygote writes was removed");
            }
            const char *rel = path + zlen + 1;
            if ((size_t)len <= zlen + 1 || strncmp(path, zdir, zlen) != 0 || path[zlen] != '/' ||
                strchr(rel, '/') != NULL) {
                errno = EPERM;
                die("a file open for writing outside the zygote's folder");
            }
            nfd = openat(cdir, rel, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
            if (nfd < 0)
                die("create a written file");
            /* A file open for writing only cannot be read through
             * its own description. */
            int rfd = open(proc, O_RDONLY | O_CLOEXEC);
            if (rfd < 0 || copy_to(rfd, nfd, st.st_size) != 0)
                die("copy a written file");
            close(rfd);
            if (fl & O_APPEND)
                fcntl(nfd, F_SETFL, O_APPEND);
        }
        if (off >= 0 && lseek(nfd, off, SEEK_SET) < 0)
            die("seek");
        if (dup3(nfd, fd, (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0)
            die("dup3");
        close(nfd);
    }
}


/*
 * Hot pages. A child's first write to each page it shares with its zygote
 * is a copy-on-write fault, and a child writes about a thousand of them
 * (TeX's arrays, the heap); on virtual machines whose page faults are
 * costly these faults were a third of a child's CPU and all of its extra
 * latency over a warm process. The zygote's first child, the probe, which
 * typesets outprint's own probe document (never a user's), records at its
 * exit which pages it had made its own; every later child makes those
 * pages its own with one madvise(MADV_POPULATE_WRITE) per range before it
 * waits for its document, so a document finds most of them already
 * copied. Ranges that do not exist in a child (allocated after the fork)
 * fail harmlessly.
 */
#define HOT_RANGES 8192
#define HOT_PAGES 16384 /* 64 MiB at most, whatever the probe did */

struct hot_range {
    uint64_t start, len;
};

/* hot_record writes the ranges of private writable pages that this
 * process maps exclusively (bit 56 of /proc/self/pagemap) to hot_path. */
static void hot_record(void) {
    FILE *m = fopen("/proc/self/maps", "re");
    int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (m == NULL || pm < 0) {
        if (m != NULL)
            fclose(m);
        if (pm >= 0)
            close(pm);
        return;
    }
    static struct hot_range out[HOT_RANGES];
    static uint64_t ent[512];
    int n = 0;
    unsigned long pages = 0;
    char line[512];
    while (fgets(line, sizeof line, m) != NULL && pages < HOT_PAGES) {
        unsigned long a, b;
        char perm[8];
        if (sscanf(line, "%lx-%lx %7s", &a, &b, perm) != 3 || perm[1] != 'w' || perm[3] != 'p')
            continue;
        for (unsigned long at = a; at < b && pages < HOT_PAGES;) {
            size_t k = (b - at) / 4096;
            if (k > 512)
                k = 512;
            ssize_t got = pread(pm, ent, k * 8, (off_t)(at / 4096) * 8);
            if (got <= 0)
                break;
            k = (size_t)got / 8;
            for (size_t i = 0; i < k && pages < HOT_PAGES; i++, at += 4096) {
                if (!(ent[i] >> 63 & 1) || !(ent[i] >> 56 & 1))
                    continue;
                if (n > 0 && out[n - 1].start + out[n - 1].len == at)
                    out[n - 1].len += 4096;
                else if (n < HOT_RANGES)
                    out[n++] = (struct hot_range){at, 4096};
                else
                    continue;
                pages++;
            }
        }
    }
    fclose(m);
    close(pm);
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", hot_path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    size_t want = (size_t)n * sizeof out[0];
    if (write(fd, out, want) == (ssize_t)want && close(fd) == 0)
        rename(tmp, hot_path);
    else
        unlink(tmp);
}

/* hot_prefault makes the recorded pages this child's own. */
static void hot_prefault(void) {
    if (hot_path[0] == 0)
        return;
    int fd = open(hot_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return; /* no probe yet */
    static struct hot_range r[HOT_RANGES];
    ssize_t n = read(fd, r, sizeof r);
    close(fd);
    unsigned long pages = 0;
    for (ssize_t i = 0; i < n / (ssize_t)sizeof r[0] && pages < HOT_PAGES; i++) {
        madvise((void *)(uintptr_t)r[i].start, (size_t)r[i].len, MADV_POPULATE_WRITE);
        pages += r[i].len / 4096;
    }
}

/* Flags of a request. */
#define FORK_PROBE 1 /* the probe: record the hot pages at exit */

struct request {
    uint64_t cpu, flags;
    char dir[PATH_MAX];
};

/* child runs in the new process; it returns to the caller of fopen when
 * the server says go. When it is detached from the zygote (own process
 * group, files, folder), it closes done, the write end of a pipe the
 * zygote waits on. */
static void child(const struct request *r, int fds[4], pid_t server, int done) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        die("PR_SET_PDEATHSIG");
    if (getppid() != server)
        _exit(124); /* the server died between clone and prctl */
    if (setpgid(0, 0) != 0)
        die("setpgid");
    struct rlimit cpu = {r->cpu, r->cpu + 1};
    if (setrlimit(RLIMIT_CPU, &cpu) != 0)
        die("RLIMIT_CPU");
    if (dup2(fds[1], 1) < 0 || dup2(fds[1], 2) < 0 || dup2(fds[2], 3) < 0)
        die("dup2");
    close(fds[1]);
    close(fds[2]);
    close(ctl_fd);
    ctl_fd = -1;
    char zdir[PATH_MAX];
    if (getcwd(zdir, sizeof zdir) == NULL)
        die("getcwd");
    detach_files(zdir, fds[0], done, fds[3]);
    if (fchdir(fds[0]) != 0)
        die("fchdir");
    close(fds[0]);
    char buf[PATH_MAX + 32];
    static const char *dirs[] = {"HOME", "TMPDIR", NULL};
    for (int i = 0; dirs[i]; i++)
        setenv(dirs[i], r->dir, 1);
    snprintf(buf, sizeof buf, "%s/.texmf-var", r->dir);
    setenv("TEXMFVAR", buf, 1);
    snprintf(buf, sizeof buf, "%s/.texmf-config", r->dir);
    setenv("TEXMFCONFIG", buf, 1);
    snprintf(buf, sizeof buf, "%s/.cache", r->dir);
    setenv("XDG_CACHE_HOME", buf, 1);
    close(done);
    if (r->flags & FORK_PROBE)
        atexit(hot_record);
    else
        hot_prefault();
    /* Detached: wait, using no CPU, until the document is there. */
    char b;
    ssize_t n;
    while ((n = read(fds[3], &b, 1)) < 0 && errno == EINTR)
        ;
    if (n != 1)
        _exit(0); /* discarded unused */
    close(fds[3]);
}

static void reply(int32_t v) {
    while (send(ctl_fd, &v, sizeof v, MSG_NOSIGNAL) < 0 && errno == EINTR)
        ;
}

/* serve is the zygote's loop; it returns only in a child. */
static void serve(void) {
    pid_t server = getppid();
    fflush(NULL);
    /* Free heap memory goes back to the kernel: a child's allocations
     * then get fresh pages instead of copying the zygote's free ones
     * (some 15 % fewer page faults per child). */
    malloc_trim(0);
    if (send(ctl_fd, "R", 1, MSG_NOSIGNAL) != 1)
        _exit(0);
    for (;;) {
        struct request r;
        memset(&r, 0, sizeof r);
        struct iovec iov = {&r, sizeof r};
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(4 * sizeof(int))];
        } c;
        struct msghdr m = {0};
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = c.buf;
        m.msg_controllen = sizeof c.buf;
        ssize_t n = recvmsg(ctl_fd, &m, MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            _exit(0); /* the server closed the socket: retire */
        int fds[4] = {-1, -1, -1, -1}, nfds = 0;
        for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); h != NULL; h = CMSG_NXTHDR(&m, h)) {
            if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS) {
                int k = (int)((h->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                for (int i = 0; i < k; i++) {
                    int fd;
                    memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof fd);
                    if (nfds < 4)
                        fds[nfds++] = fd;
                    else
                        close(fd);
                }
            }
        }
        r.dir[sizeof r.dir - 1] = 0;
        if (nfds != 4 || (size_t)n < sizeof r.cpu + sizeof r.flags + 2 || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
            for (int i = 0; i < nfds; i++)
                close(fds[i]);
            reply(-EINVAL);
            continue;
        }
        /* The zygote answers only when the child is detached: the
         * server may retire the zygote as soon as it has the answer
         * (remove its folder, kill its process group), and a child still
         * copying the zygote's written files or not yet in a group of
         * its own would lose them or die with it. The pipe's write end
         * closes when the child is detached, or dies. */
        int done[2];
        if (pipe2(done, O_CLOEXEC) != 0) {
            int err = errno;
            for (int i = 0; i < 4; i++)
                close(fds[i]);
            reply(-err);
            continue;
        }
        fflush(NULL);
        /* Not fork(): glibc's fork cannot make the server the parent.
         * The raw clone skips glibc's fork handlers, which matters not
         * in a process with one thread and no lock held here; the thread
         * id glibc caches stays the zygote's, which raise() and abort()
         * do not use (they ask the kernel, glibc >= 2.34). */
        long pid = syscall(SYS_clone, (unsigned long)(CLONE_PARENT | SIGCHLD), 0L, 0L, 0L, 0L);
        if (pid == 0) {
            close(done[0]);
            child(&r, fds, server, done[1]);
            return;
        }
        int err = errno;
        close(done[1]);
        for (int i = 0; i < 4; i++)
            close(fds[i]);
        if (pid > 0) {
            /* EOF when the child is detached, or dead: the server
             * reaps it either way, so it gets the pid. */
            char b;
            while (read(done[0], &b, 1) < 0 && errno == EINTR)
                ;
        }
        close(done[0]);
        reply(pid > 0 ? (int32_t)pid : -err);
    }
}

typedef FILE *(*fopen_fn)(const char *, const char *);


/* has_suffix reports whether s ends with suffix, ignoring ASCII case. */
static int has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

/* font_file opens a font file for reading as a stream over its mapped
 * contents, or returns NULL (then the caller opens it as usual). */
static FILE *font_file(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
        close(fd);
        return NULL;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return NULL;
    FILE *f = fmemopen(p, (size_t)st.st_size, "r");
    if (f == NULL)
        munmap(p, (size_t)st.st_size);
    return f; /* the mapping lives as long as the process: a driver child */
}

FILE *fopen(const char *path, const char *mode) {
    static fopen_fn real;
    if (real == NULL)
        real = (fopen_fn)dlsym(RTLD_NEXT, "fopen");
    if (ctl_fd >= 0 && gate != NULL && path != NULL && strcmp(path, gate) == 0) {
        free(gate);
        gate = NULL;
        serve();
        in_child = 1;
    }
    if (in_child && fonts_in_memory && path != NULL && mode != NULL && mode[0] == 'r' && strchr(mode, '+') == NULL &&
        (has_suffix(path, ".ttf") || has_suffix(path, ".otf") || has_suffix(path, ".ttc") || has_suffix(path, ".pfb"))) {
        FILE *f = font_file(path);
        if (f != NULL)
            return f;
    }
    return real(path, mode);
}
