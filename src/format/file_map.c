/* file_map.c - see file_map.h: a regular file mapped MAP_PRIVATE, PROT_READ. */
#include "format/file_map.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int file_map_readonly(const char *path, const void **base, size_t *size, cf_err *err) {
    *base = NULL;
    *size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return cf_fail(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return cf_fail(err, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return cf_fail(err, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return 0;
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) return cf_fail(err, "%s: cannot mmap: %s", path, strerror(e));
    *base = map;
    *size = (size_t)st.st_size;
    return 0;
}

void file_unmap(const void *base, size_t size) {
    if (base && size) munmap((void *)base, size);
}
