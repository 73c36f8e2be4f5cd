Btj
location../../etc/passwdj
offset0j
length12p