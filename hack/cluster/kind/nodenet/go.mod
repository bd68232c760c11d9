module dra-admin.local/nodenet

go 1.24
