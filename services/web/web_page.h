/* web_page: the dashboard's files, compiled in from services/web/page/ (embed.cmake). */
#ifndef CLOISTER_WEB_PAGE_H
#define CLOISTER_WEB_PAGE_H

#include <stddef.h>

typedef struct {
    const char *path; /* "/index.html", "/app.css", "/app.js" */
    const unsigned char *data;
    size_t size;
} web_page_file_t;

/* Every file, ended by an entry whose path is NULL. */
extern const web_page_file_t web_page_files[];

#endif
