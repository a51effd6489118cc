/* SPDX-License-Identifier: GPL-2.0 */
/*
 * An HTTP GET on loopback, for guest tests that read node_exporter's and
 * Prometheus's HTTP endpoints (tests/guest/highwater-fleet.c,
 * tests/services/exporter.c) without a client the guest may not have.
 */
#ifndef HW_HTTP_H
#define HW_HTTP_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/*
 * GET @path from 127.0.0.1:@port, the body into @body (NUL-terminated,
 * truncated to @size).  The HTTP status, or -1.  HTTP/1.0: the server
 * closes the connection after a body that is not chunked.
 */
static inline int http_get(int port, const char *path, char *body, size_t size)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	static char buf[8 << 20];
	size_t len = 0;
	ssize_t n;
	int fd, status = -1;
	char *start;

	body[0] = '\0';
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	dprintf(fd, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
	while (len < sizeof(buf) - 1 && (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += n;
	close(fd);
	buf[len] = '\0';
	start = strstr(buf, "\r\n\r\n");
	if (!start || sscanf(buf, "HTTP/%*s %d", &status) != 1)
		return -1;
	snprintf(body, size, "%s", start + 4);
	return status;
}

#endif /* HW_HTTP_H */
