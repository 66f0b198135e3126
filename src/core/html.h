/* Text for the HTML pages the program writes (the NIAH heatmap, the score
 * plots): the one escaping they all use, so a name or an answer from a file
 * can never open a tag or end an attribute. */
#ifndef VKV_HTML_H
#define VKV_HTML_H

#include <stdio.h>

/* Writes s to f with < > & " ' as entities: safe in element text and in
 * double- or single-quoted attribute values. */
void vkv_html_text(FILE *f, const char *s);

#endif
