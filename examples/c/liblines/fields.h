/* libfields.so's one function (fields.c). */
int lib_fields(const char *line);
