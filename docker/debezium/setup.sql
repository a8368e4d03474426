-- docker/debezium/setup.sql
CREATE USER 'debezium'@'%' IDENTIFIED BY 'dbz';
GRANT SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, BINLOG MONITOR, LOCK TABLES ON *.* TO 'debezium'@'%';
CREATE DATABASE shop;
CREATE TABLE shop.user_profile (user_id INT PRIMARY KEY, age INT, sex VARCHAR(8));
