/*
 * textfile.c - a small text file read whole (see textfile.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "textfile.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

int sw_read_text(const char *path, char *buf, size_t cap)
{
    buf[0] = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t n = 0;
    while (n + 1 < cap) {
        ssize_t k = read(fd, buf + n, cap - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    close(fd);
    buf[n] = 0;
    return n ? 0 : -1;
}
