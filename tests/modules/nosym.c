/* A shared object without poddb_module_init: the server must say so. */
int not_a_poddb_module(void);
int not_a_poddb_module(void) { return 0; }
